"""Retrieval speed: what 16 query prompts over one document prompt cost against one pair, measured in one run.

A retrieval search varies the query prompt while the document prompt stays (step 1 of ``promptsearch retrieval``):
the corpus is encoded once, and each further query prompt costs one pass over the queries and one scoring. This
benchmark times, each with a fresh task and no stored corpus vectors,

* one pair: the model's own query and document prompts, scored alone;
* 16 query prompts (the shipped library's, ``{task}`` filled) with that one document prompt, scored together;

and prints the ratio of the fastest of ``--repeats`` measurements of each, taken in turn (the issue's target: at
most 1.2x on a corpus at least 10x the queries). The ratio is arithmetic more than engineering: the corpus pass is
paid once either way, each further query prompt costs one pass over the queries, so 16 prompts cost about
``1 + 15 x (query tokens) / (corpus tokens + query tokens)``; within 1.2x once the corpus holds ~75x the queries'
tokens (real retrieval data: documents both outnumber and outlength the queries). Each pass over the queries also
carries its prompt's tokens (the library's instructions are longer than the queries): the run prints what 16 prompts
cost by tokens alone (each text's tokens cut at the model's max length, as encoding cuts them): the ratio were a
token to cost the same in every pass (a long passage's tokens cost more, attention growing with its length; a short
query's more on a GPU, whose host work per pass is the same whatever its length). The data is the
built-in demo task (paraphrase retrieval from STS-B dev: 259 queries, 2,647 sentences) with ``--queries`` of its
queries drawn (seed 0) and ``--distractors`` Wikipedia sentences (the data folder's sample) added to the corpus, so
the corpus is the larger side, as in real retrieval data where documents outnumber and outlength the queries.
``--passages K`` makes each of the demo's documents a passage of K sentences (itself, then K - 1 Wikipedia
sentences), as retrieval corpora hold passages rather than single sentences.

``--threads 1,4`` times both the one pair and the 16 prompts once for each number of threads that share the
corpus's texts as they are tokenized (``st_pooled``'s ``threads``, on any device; the library's default is 1 on
the CPU and ``TOKENIZE_THREADS`` elsewhere; the query prompts tokenized ahead as the library does), each way's ratio
printed; the last lines are the library default's when it was timed, else the first number's.

    python benchmarks/retrieval_speed.py [--model default|bert-base|NAME] [--device cpu|cuda] [--queries 64]
                                         [--distractors 8000] [--passages 1] [--threads 1,4] [--json out.json]
    python benchmarks/retrieval_speed.py --queries 259 --distractors 0 --passages 8   # 10x the queries, passages
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import itertools
import json
import os
import time

from _device import add_device_flag, bert_base_dir, device_name, resolve, sync


def build_data(queries: int, distractors: int, data_dir, passages: int = 1):
    from promptsearch.data.retrieval import demo_task
    from promptsearch.eval.retrieval import sample_queries
    from promptsearch.paths import train_dir

    data = sample_queries(demo_task(data_dir), queries, seed=0)
    wiki: list[str] = []
    need = distractors + (passages - 1) * len(data.corpus)  # distractors, and the sentences passages are made of
    if need:
        seen: set[str] = set()
        with open(train_dir(data_dir) / "wiki1m_sample.txt", encoding="utf-8") as f:
            for line in f:
                if line.strip() and line.strip() not in seen:
                    seen.add(line.strip())
                    wiki.append(line.strip())
                    if len(wiki) >= need:
                        break
    extra = {f"wiki{i:07d}": t for i, t in enumerate(wiki[:distractors])}
    corpus = {**data.corpus, **extra}
    name = f"{data.name}+{len(extra)} wiki"
    if passages > 1:  # each demo document becomes a passage: itself, then passages - 1 Wikipedia sentences
        fill = itertools.cycle(wiki[distractors:] or ["."])  # the sample may hold fewer: sentences are reused
        corpus = {cid: " ".join([t, *(next(fill) for _ in range(passages - 1))]) if cid in data.corpus else t
                  for cid, t in corpus.items()}
        name += f", documents {passages}-sentence passages"
    return dataclasses.replace(data, name=name, corpus=corpus)


def timed_evaluate(enc, data, candidates, device) -> tuple[float, dict, object]:
    from promptsearch.eval.retrieval import RetrievalTask

    task = RetrievalTask(data, cache_dir=False, show_progress_bar=False)  # nothing stored: the corpus is encoded
    try:
        sync(device)
        t0 = time.perf_counter()
        got = task.evaluate(enc, candidates)
        sync(device)
        return time.perf_counter() - t0, got, task
    finally:
        task.close()


def breakdown(enc, data, candidates, device) -> dict[str, float]:
    """The parts of one ``evaluate`` of ``candidates`` on a fresh task, each timed alone: the queries' encodings
    (every query prompt), the corpus encoding (the one document prompt), then the scoring with both in memory."""
    from promptsearch.eval.retrieval import RetrievalTask

    task = RetrievalTask(data, cache_dir=False, show_progress_bar=False)
    try:
        spans = []
        for step in (lambda: task.query_vectors(enc, [c.side("query") for c in candidates]),
                     lambda: task.corpus_vectors(enc, [candidates[0].side("document")]),
                     lambda: task.evaluate(enc, candidates)):  # both read from memory now: the scoring alone
            sync(device)
            t0 = time.perf_counter()
            step()
            sync(device)
            spans.append(time.perf_counter() - t0)
        return dict(zip([f"{len(candidates)} query encodings", "corpus encoding",
                         f"scoring {len(candidates)} prompts"], spans))
    finally:
        task.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="default", help="a model name or folder, or bert-base: a randomly initialised "
                                                       "BERT-base (BertConfig(), the default model's tokenizer)")
    ap.add_argument("--queries", type=int, default=64, help="queries drawn from the demo task (default 64)")
    ap.add_argument("--distractors", type=int, default=8000, help="Wikipedia sentences added to the corpus "
                                                                   "(default 8000)")
    ap.add_argument("--passages", type=int, default=1, help="make each demo document a passage of this many "
                                                           "sentences: itself, then Wikipedia sentences (default 1: "
                                                           "the sentence alone)")
    ap.add_argument("--prompts", type=int, default=16, help="query prompts scored over one document prompt")
    ap.add_argument("--repeats", type=int, default=2, help="measurements of each, interleaved (default 2)")
    ap.add_argument("--bf16", action="store_true", help="run under bf16 autocast (default: float32)")
    ap.add_argument("--threads", default=None, help="time each with each of these numbers of threads sharing the "
                                                    "corpus's texts (e.g. 1,4; default: the library's)")
    ap.add_argument("--data-dir", default=None)
    add_device_flag(ap)
    ap.add_argument("--json", default=None, help="also write the numbers here")
    args = ap.parse_args()

    import torch

    from promptsearch.encoding import PromptEncoder, pooled
    from promptsearch.encoding import encoder as encoder_module
    from promptsearch.eval.retrieval import RetrievalCandidate
    from promptsearch.search.retrieval import library_prompts, own_candidate

    device = resolve(args.device)
    model = args.model
    if model == "bert-base":  # bert-base's FLOPs, an encoder with no MLM head (as the default model is)
        from transformers import AutoTokenizer

        from promptsearch.model.loading import default_model_path

        model = bert_base_dir(AutoTokenizer.from_pretrained(default_model_path()), head=False)
    enc = PromptEncoder.from_pretrained(model, device=str(device), bf16=args.bf16, show_progress_bar=False)
    data = build_data(args.queries, args.distractors, args.data_dir, args.passages)
    tok, limit = enc.tokenizer, enc.pooled_max_length or 10**9

    def tokens(texts) -> int:  # what a pass feeds the model: each text's tokens, cut at the max length as encoding cuts
        return sum(min(len(ids), limit) for ids in tok(list(texts), verbose=False)["input_ids"])

    q_tokens, c_tokens = tokens(data.queries.values()), tokens(data.corpus.values())
    print(f"machine: {os.cpu_count()} cores, device {device_name(device)}, torch {torch.__version__}; model "
          f"{args.model} ({enc.precision}); data {data.name}: {len(data.queries)} queries ({q_tokens} tokens), "
          f"{len(data.corpus)} documents ({c_tokens} tokens): the corpus {len(data.corpus) / len(data.queries):.1f}x "
          f"the queries ({c_tokens / q_tokens:.1f}x their tokens)", flush=True)
    own = own_candidate(enc)
    prompts = [p for p, _ in library_prompts("query", data.description)]
    prompts = list(dict.fromkeys([own.query, *prompts]))[: args.prompts]
    many = [RetrievalCandidate.of(q, own.document, own.readout) for q in prompts]
    # what the arithmetic allows: each pass over the queries carries its prompt's tokens too
    qp_tokens = [tokens(p + t for t in data.queries.values()) for p in prompts]
    by_tokens = (c_tokens + sum(qp_tokens)) / (c_tokens + qp_tokens[0])
    print(f"  the {len(many)} query prompts' passes hold {sum(qp_tokens)} tokens ({qp_tokens[0]} the one pair's): by "
          f"tokens alone, {len(many)} prompts cost {by_tokens:.2f}x one pair", flush=True)
    enc.encode(["warm up the thread pools ."] * 8)
    library_st_pooled = encoder_module.st_pooled
    default = pooled.tokenizing_defaults(device)[1]  # the library's
    counts = list(dict.fromkeys(int(a) for a in args.threads.split(","))) if args.threads else [default]
    times: dict[int, tuple[list[float], list[float]]] = {a: ([], []) for a in counts}  # (one pair, many) each
    try:
        for r in range(args.repeats):  # interleaved, the fastest of each kept: a busy machine slows one, not the ratio
            for a in (counts if r % 2 == 0 else counts[::-1]):
                encoder_module.st_pooled = functools.partial(library_st_pooled, threads=a)  # on any device
                how = f" (the corpus's texts in {a} thread{'s' if a != 1 else ''})" if len(counts) > 1 else ""
                one_s, one, t1 = timed_evaluate(enc, data, [own], device)
                times[a][0].append(one_s)
                print(f"  one pair{how} ({own.shown}): {one_s:.2f} s, {t1.corpus_encodings} corpus encoding, "
                      f"nDCG@10 {one[own]['ndcg@10']:.4f}", flush=True)
                many_s, got, t2 = timed_evaluate(enc, data, many, device)
                times[a][1].append(many_s)
                print(f"  {len(many)} query prompts over one document prompt{how}: {many_s:.2f} s, "
                      f"{t2.corpus_encodings} corpus encoding, {t2.query_encodings} query encodings; nDCG@10 from "
                      f"{min(m['ndcg@10'] for m in got.values()):.4f} to "
                      f"{max(m['ndcg@10'] for m in got.values()):.4f}", flush=True)
    finally:
        encoder_module.st_pooled = library_st_pooled
    if len(counts) > 1:
        for a in counts:
            print(f"  with {a} thread{'s' if a != 1 else ''}: one pair {min(times[a][0]):.2f} s, {len(many)} query "
                  f"prompts {min(times[a][1]):.2f} s: {min(times[a][1]) / min(times[a][0]):.2f}x", flush=True)
    shown = default if default in times else counts[0]  # the last lines: the library's default, when timed
    ones, manys = times[shown]
    # where the 16 prompts' time goes, on a fresh task: each part timed alone, in the order evaluate takes them
    parts = breakdown(enc, data, many, device)
    print("  where it goes (" + ", ".join(f"{k} {v:.3f} s" for k, v in parts.items()) + ")", flush=True)
    one_s, many_s = min(ones), min(manys)
    ratio = many_s / one_s
    print(f"{len(many)} query prompts cost {ratio:.2f}x one pair (the fastest of {args.repeats} each: {many_s:.2f} s "
          f"/ {one_s:.2f} s; the corpus's texts in {shown} thread{'s' if shown != 1 else ''}"
          f"{', the library default' if shown == default else ''}; target <= 1.2x; same run, same machine)")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"model": args.model, "device": device_name(device), "queries": len(data.queries),
                       "corpus": len(data.corpus), "query_tokens": q_tokens, "corpus_tokens": c_tokens,
                       "one_pair_s": [round(x, 3) for x in ones], "many_s": [round(x, 3) for x in manys],
                       "threads": shown,
                       "by_threads": {a: {"one_pair_s": [round(x, 3) for x in o], "many_s": [round(x, 3) for x in m]}
                                      for a, (o, m) in times.items()},
                       "prompts": len(many),
                       "ratio": round(ratio, 3), "prompted_query_tokens": qp_tokens,
                       "by_tokens": round(by_tokens, 3), "parts_s": {k: round(v, 4) for k, v in parts.items()},
                       "corpus_encodings": [t1.corpus_encodings, t2.corpus_encodings]}, f,
                      indent=1)


if __name__ == "__main__":
    main()
