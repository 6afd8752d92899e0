# The figure rule of every study, <study>_figure, from what the study's rules file gave
# add_figure_rule (common.smk): one job per figure, its {figure} wildcard a function of
# factstore.plots.<study> that reads the tables listed for it and writes figures/<study>_{figure}.png
# and .pdf. Included after every study's rules file.

for study, figures in FIGURE_STUDIES.items():

    rule:
        name:
            f"{study}_figure"
        output:
            png=figure_report(study, figures["title"]),
            pdf=f"figures/{study}_{{figure}}.pdf",
        wildcard_constraints:
            figure="|".join(figures["inputs"]),
        input:
            unpack(figure_inputs(study)),
            code=figure_code(study),
        params:
            step="figures.draw",
            json=figure_json(study),
            io=runner_io,
            **figure_report_params(study),
        log:
            f"logs/{study}/figure_{{figure}}.log",
        shell:
            STEP

    # a docstring in a loop cannot name its study: set on the rule
    getattr(rules, f"{study}_figure").rule.docstring = f"One figure of the study: figures/{study}_{{figure}}.png and .pdf."
