# Across all works: bits per parameter of every study that ran, side by side.

FIGURES += figure_files("overview", ["bits_per_parameter"])


rule overview_bits_per_parameter:
    input:
        unpack(lambda w: {f"metrics_{study}": path for study, path in METRICS.items()}),
        code=step_code("overview"),
    output:
        table="results/overview/bits_per_parameter.csv",
        png="figures/overview_bits_per_parameter.png",
        pdf="figures/overview_bits_per_parameter.pdf",
    params:
        step="overview.bits_per_parameter",
        json=as_json({}),
        io=runner_io,
    log:
        "logs/overview_bits_per_parameter.log",
    shell:
        STEP
