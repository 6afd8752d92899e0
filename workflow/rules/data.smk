# Data layer: fetch (mirror or URL, sha256-verified), then tidy tables under data/processed/.

DATA_TABLES = {
    "goodreads_facts": "data/processed/goodreads_facts.csv",
    "goodbooks_facts": "data/processed/goodbooks_facts.csv",
    "wikipedia_paragraphs": "data/processed/wikipedia_paragraphs.csv",
    "fewrel_sentences": "data/processed/fewrel_sentences.csv",
}
FETCH_PARAMS = {key: config["data"][key] for key in ("retries", "timeout_s")}


rule data:
    """Every prepared table and the manifest of counts and licenses."""
    input:
        DATA_TABLES.values(),
        "data/processed/manifest.json",


rule fetch_file:
    priority: 10  # among its files, FewRel's pid2name feeds prepare_fewrel, which feeds the run's longest job (dilution_fewrel); every fetch takes ~1 s
    output:
        file="data/raw/{source}.{ext}",
        report="data/raw/{source}.{ext}.source.json",
    wildcard_constraints:
        source="book_authors|goodbooks|fewrel_pid2name",
        ext="csv|json",
    input:
        code=step_code("fetch"),
    params:
        step="fetch.file",
        json=lambda w: as_json(FETCH_PARAMS, source=w.source),
        io=runner_io,
    log:
        "logs/data/fetch_{source}.{ext}.log",
    shell:
        STEP


rule fetch_fewrel:
    priority: 10  # FewRel's data feeds the run's longest job (dilution_fewrel), so it starts early
    output:
        relations="data/raw/fewrel_relations.json",
        report="data/raw/fewrel_relations.json.source.json",
    input:
        code=step_code("fetch"),
    params:
        step="fetch.fewrel",
        json=as_json(FETCH_PARAMS, fewrel_source=config["dilution"]["fewrel"]["source"]),
        io=runner_io,
    log:
        "logs/data/fetch_fewrel.log",
    shell:
        STEP


rule fetch_wikipedia:
    priority: 10  # the head of a long chain (-> prepare_wikipedia -> dilution_pretrain -> dilution_prune_bert):
    # Snakemake does not pass a rule's priority on to the jobs it waits for, so each link carries it
    output:
        file="data/raw/wikipedia_summaries.json",
        report="data/raw/wikipedia_summaries.json.source.json",
    input:
        code=step_code("fetch"),
    params:
        step="fetch.wikipedia",
        json=as_json({}),
        io=runner_io,
    log:
        "logs/data/fetch_wikipedia.log",
    shell:
        STEP


rule prepare_goodreads:
    input:
        book_authors="data/raw/book_authors.csv",
        goodbooks="data/raw/goodbooks.csv",
        code=step_code("prepare"),
    output:
        facts=DATA_TABLES["goodreads_facts"],
        goodbooks=DATA_TABLES["goodbooks_facts"],
    params:
        step="prepare.goodreads",
        json=as_json({}),
        io=runner_io,
    log:
        "logs/data/prepare_goodreads.log",
    shell:
        STEP


rule prepare_wikipedia:
    priority: 10  # the chain's second link (see fetch_wikipedia)
    input:
        summaries="data/raw/wikipedia_summaries.json",
        code=step_code("prepare"),
    output:
        paragraphs=DATA_TABLES["wikipedia_paragraphs"],
    params:
        step="prepare.wikipedia",
        json=as_json({}),
        io=runner_io,
    log:
        "logs/data/prepare_wikipedia.log",
    shell:
        STEP


rule prepare_fewrel:
    priority: 10  # feeds the run's longest job (see fetch_fewrel)
    input:
        relations="data/raw/fewrel_relations.json",
        report="data/raw/fewrel_relations.json.source.json",
        pid2name="data/raw/fewrel_pid2name.json",
        code=step_code("prepare"),
    output:
        sentences=DATA_TABLES["fewrel_sentences"],
    params:
        step="prepare.fewrel",
        json=as_json({key: config["data"][key] for key in ("fewrel_test_per_relation", "split_seed")}),
        io=runner_io,
    log:
        "logs/data/prepare_fewrel.log",
    shell:
        STEP


rule data_manifest:
    input:
        **{f"table_{name}": path for name, path in DATA_TABLES.items()},
        report_book_authors="data/raw/book_authors.csv.source.json",
        report_goodbooks="data/raw/goodbooks.csv.source.json",
        report_fewrel="data/raw/fewrel_relations.json.source.json",
        report_fewrel_pid2name="data/raw/fewrel_pid2name.json.source.json",
        report_wikipedia="data/raw/wikipedia_summaries.json.source.json",
        code=step_code("prepare"),
    output:
        manifest="data/processed/manifest.json",
    params:
        step="prepare.manifest",
        json=as_json({}),
        io=runner_io,
    log:
        "logs/data/manifest.log",
    shell:
        STEP
