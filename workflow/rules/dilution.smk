# Capacity per label (S3, second half): max dilution of the archetype toy model, of a small
# BERT pretrained by masked LM on two Wikipedia subsets, and of BERT-1 (MiniLM's first block) fine-tuned on FewRel.
#
# Follows workflow/rules/assoc.smk: computation rules running steps of one module per part
# (factstore.experiments.dilution_archetypes, _bert, _fewrel: editing one part's code reruns only
# its rules), a summary rule (step module dilution_summary) writing the metrics the claims read, and ONE
# figure rule whose {figure} wildcard picks a function of factstore.plots.dilution.

DILUTION = config["dilution"]
DILUTION_TOY = DILUTION["archetypes"]
DILUTION_BERT = DILUTION["bert"]
DILUTION_FEWREL = DILUTION["fewrel"]
DILUTION_BERT_CORPUS = {
    key: DILUTION_BERT[key] for key in ("token_budget", "eval_paragraphs", "length")
} | {"seed": DILUTION["seed"]}
DILUTION_FEWREL_SETTINGS = {
    "labels": [[n, DILUTION_FEWREL["labels_per_label"]] for n in DILUTION_FEWREL["labels"]],
    "samples": [[DILUTION_FEWREL["samples_labels"], k] for k in DILUTION_FEWREL["per_label"]],
}


rule dilution:
    """Every result of the capacity-per-label study (its figures: `snakemake figures`)."""
    input:
        "results/dilution/metrics.csv",


rule dilution_archetypes:
    output:
        table="results/dilution/archetypes_{vary}.csv",
    wildcard_constraints:
        vary="|".join(DILUTION_TOY["sweeps"]),
    input:
        code=step_code("dilution_archetypes"),
    params:
        step="dilution_archetypes.archetypes",
        json=lambda w: as_json(
            get_dilution_archetypes_params(),
            vary=w.vary, values=DILUTION_TOY["sweeps"][w.vary], seed=DILUTION["seed"],
        ),
        io=runner_io,
    threads: config["threads"]
    log:
        "logs/dilution/archetypes_{vary}.log",
    shell:
        STEP


rule dilution_pretrain:
    """Masked-LM pretraining on one subset; checkpoints under the run's results/dilution/checkpoints/ so an
    interrupted run resumes (the checkpoint is removed once the model is written)."""
    output:
        model="results/dilution/bert_{subset}.pt",
        log="results/dilution/pretrain_log_{subset}.csv",
        subset="results/dilution/subset_{subset}.json",
    wildcard_constraints:
        subset="few|many",
    # pretraining (~230-430 CPU-s) -> pruning (~120) is a long chain, which starts at
    # fetch_wikipedia (every link has priority 10): without the priority a default run begins the
    # pretraining near its end, a core idle meanwhile; with it the pretraining starts as soon as
    # prepare_wikipedia has run
    priority: 10
    input:
        paragraphs=DATA_TABLES["wikipedia_paragraphs"],
        code=step_code("dilution_bert"),
    params:
        step="dilution_bert.pretrain",
        json=lambda w: as_json(
            get_dilution_pretrain_params(),
            subset=w.subset, seed=DILUTION["seed"],
            checkpoint=in_run(f"results/dilution/checkpoints/pretrain_{w.subset}.pt"),
        ),
        io=runner_io,
    threads: config["threads"]
    resources:
        gpu=1,
    log:
        "logs/dilution/pretrain_{subset}.log",
    shell:
        STEP


rule dilution_prune_bert:
    priority: 10  # the end of the pretraining chain (see dilution_pretrain)
    output:
        table="results/dilution/bert_pruning_{subset}.csv",
    wildcard_constraints:
        subset="few|many",
    input:
        model=rules.dilution_pretrain.output.model,
        paragraphs=DATA_TABLES["wikipedia_paragraphs"],
        code=step_code("dilution_bert"),
    params:
        step="dilution_bert.prune_bert",
        json=lambda w: as_json(
            DILUTION_BERT_CORPUS,
            subset=w.subset, groups=DILUTION_BERT["groups"], rates=DILUTION_BERT["rates"],
            retrain_steps=DILUTION_BERT["retrain_steps"], batch_size=DILUTION_BERT["batch_size"],
            eval_maskings=DILUTION_BERT["eval_maskings"],
            learning_rate=DILUTION_BERT["retrain_learning_rate"],
        ),
        io=runner_io,
    threads: config["threads"]
    resources:
        gpu=1,
    log:
        "logs/dilution/prune_bert_{subset}.log",
    shell:
        STEP


rule dilution_fewrel:
    """Both FewRel sweeps in one job, so that the setting they share is fine-tuned once."""
    priority: 10  # the run's longest job: started first
    output:
        **{sweep: f"results/dilution/fewrel_{sweep}.csv" for sweep in DILUTION_FEWREL_SETTINGS},
    input:
        sentences=DATA_TABLES["fewrel_sentences"],
        code=step_code("dilution_fewrel"),
    params:
        step="dilution_fewrel.fewrel_dilution",
        json=as_json(
            {k: DILUTION_FEWREL[k] for k in ("rates", "seeds", "epochs", "batch_size", "learning_rate", "max_length")},
            sweeps=DILUTION_FEWREL_SETTINGS, seed=DILUTION["seed"], tolerance=DILUTION["fewrel_tolerance"],
        ),
        io=runner_io,
    threads: config["threads"]
    resources:
        gpu=1,
    log:
        "logs/dilution/fewrel.log",
    shell:
        STEP


DILUTION_TOY_TABLES = {
    f"archetypes_{vary}": rules.dilution_archetypes.output.table.format(vary=vary) for vary in DILUTION_TOY["sweeps"]
}
DILUTION_BERT_TABLES = {
    f"bert_{subset}": rules.dilution_prune_bert.output.table.format(subset=subset) for subset in ("few", "many")
}
DILUTION_PRETRAIN_LOGS = {
    f"log_{subset}": rules.dilution_pretrain.output.log.format(subset=subset) for subset in ("few", "many")
}
DILUTION_FEWREL_TABLES = {
    f"fewrel_{sweep}": rules.dilution_fewrel.output[sweep] for sweep in DILUTION_FEWREL_SETTINGS
}
DILUTION_SUMMARY_PARAMS = {
    key: DILUTION[key] for key in ("archetype_tolerance", "bert_tolerance", "fewrel_tolerance")
}


rule dilution_summary:
    output:
        max_dilution="results/dilution/max_dilution.csv",
        metrics="results/dilution/metrics.csv",
    input:
        **DILUTION_TOY_TABLES,
        **DILUTION_BERT_TABLES,
        **DILUTION_FEWREL_TABLES,
        code=step_code("dilution_summary"),
    params:
        step="dilution_summary.summary",
        json=as_json(DILUTION_SUMMARY_PARAMS),
        io=runner_io,
    log:
        "logs/dilution/summary.log",
    shell:
        STEP


METRICS["dilution"] = rules.dilution_summary.output.metrics

# figure name (a key of factstore.plots.dilution.FIGURES) -> the tables it reads, by name.
DILUTION_FIGURE_INPUTS = {
    "archetypes": DILUTION_TOY_TABLES | {"max_dilution": rules.dilution_summary.output.max_dilution},
    "bert_pretraining": DILUTION_BERT_TABLES | DILUTION_PRETRAIN_LOGS,
    "fewrel": DILUTION_FEWREL_TABLES | {"max_dilution": rules.dilution_summary.output.max_dilution},
    "max_dilution": {"max_dilution": rules.dilution_summary.output.max_dilution},
}
FIGURES += figure_files("dilution", DILUTION_FIGURE_INPUTS)


# the rule dilution_figure (workflow/rules/figures.smk)
add_figure_rule(
    "dilution",
    "S3 capacity per label (dilution)",
    DILUTION_FIGURE_INPUTS,
    dict.fromkeys(DILUTION_FIGURE_INPUTS, DILUTION_SUMMARY_PARAMS),
)
