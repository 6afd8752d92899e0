# A language model that reads facts from a frozen fact-storing MLP, and fact editing
# (S0 "Language modelling and fact editing").
#
# One training job (facts, tokenizer, fact expert, the language model), one editing job per
# edit fraction (MLP swap, ROME, MEMIT, AlphaEdit on the same disjoint test blocks, each baseline
# tuned on a validation block), a summary with the method x edit-fraction table and the margins'
# bootstrap intervals over facts, and ONE figure rule.

EDITING = config["editing"]
# Settings the training and the editing jobs share (the edit jobs rebuild the expert to swap it).
EDITING_SHARED = {key: EDITING[key] for key in ("seed", "held_out_templates", "fact_expert")}


rule editing:
    """Every result of the language-model and editing study (its figures: `snakemake figures`)."""
    input:
        "results/editing/metrics.csv",


rule editing_train:
    """The language model's training; saves its state under the run's results/editing/checkpoints/ so an
    interrupted job resumes (the checkpoint is removed once the model is written)."""
    output:
        model="results/editing/language_model.pt",
        recall="results/editing/recall.csv",
        language_model="results/editing/language_model.csv",
    input:
        facts=DATA_TABLES["goodreads_facts"],
        code=step_code("editing"),
    params:
        step="editing.train",
        json=as_json(EDITING_SHARED, **{key: EDITING[key] for key in ("n_facts", "dim", "model", "training")},
                     checkpoint=in_run("results/editing/checkpoints/language_model.pt")),
        io=runner_io,
    threads: config["threads"]
    resources:
        gpu=1,
        mem_mb=memory_request("editing_train"),
    log:
        "logs/editing/train.log",
    shell:
        STEP


rule editing_edit:
    output:
        edits="results/editing/edits_f{fraction}.csv",
        facts="results/editing/facts_f{fraction}.csv",
        grid="results/editing/grid_f{fraction}.csv",
    wildcard_constraints:
        fraction=r"0\.[0-9]+",
    input:
        model=rules.editing_train.output.model,
        code=step_code("editing"),
    params:
        step="editing.edit",
        json=lambda w: as_json(EDITING_SHARED, grid=EDITING["grid"], perplexity_sentences=EDITING["perplexity_sentences"],
                               min_edited_facts=EDITING["min_edited_facts"], fraction=float(w.fraction)),
        io=runner_io,
    threads: config["threads"]
    resources:
        gpu=1,
    log:
        "logs/editing/edit_f{fraction}.log",
    shell:
        STEP


EDITING_EDITS = named_outputs(rules.editing_edit.output.edits, {f"edits_{f:g}".replace(".", "_"): {"fraction": f"{f:g}"} for f in EDITING["fractions"]})
EDITING_FACTS = named_outputs(rules.editing_edit.output.facts, {f"facts_{f:g}".replace(".", "_"): {"fraction": f"{f:g}"} for f in EDITING["fractions"]})
EDITING_GRIDS = named_outputs(rules.editing_edit.output.grid, {f"grid_{f:g}".replace(".", "_"): {"fraction": f"{f:g}"} for f in EDITING["fractions"]})


rule editing_summary:
    output:
        table="results/editing/table.csv",
        table_markdown="results/editing/table.md",
        metrics="results/editing/metrics.csv",
    input:
        **EDITING_EDITS,
        **EDITING_FACTS,
        recall=rules.editing_train.output.recall,
        language_model=rules.editing_train.output.language_model,
        code=step_code("editing_summary"),
    params:
        step="editing_summary.summary",
        json=as_json({"seed": EDITING["seed"]}),
        io=runner_io,
    log:
        "logs/editing/summary.log",
    shell:
        STEP


METRICS["editing"] = rules.editing_summary.output.metrics

# figure name (a key of factstore.plots.editing.FIGURES) -> the tables it reads, by name.
EDITING_FIGURE_INPUTS = {
    "scores": {"table": rules.editing_summary.output.table},
    "recall": {"recall": rules.editing_train.output.recall, "language_model": rules.editing_train.output.language_model},
    "grid": EDITING_GRIDS,
}
FIGURES += figure_files("editing", EDITING_FIGURE_INPUTS)


# the rule editing_figure (workflow/rules/figures.smk)
add_figure_rule(
    "editing",
    "S0 language modelling and fact editing",
    EDITING_FIGURE_INPUTS,
    dict.fromkeys(EDITING_FIGURE_INPUTS, {"fractions": EDITING["fractions"]}),
)
