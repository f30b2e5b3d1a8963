"""Chapter 10's self-checks accept the right answer and reject plausible wrong ones with a message; the
typical-sampling reference agrees with transformers' TypicalLogitsWarper."""

import itertools
import math

import pytest
import torch
from check_helpers import verdict
from lmbook import checks


def test_repetition_penalty_prob(capsys):
    z = torch.tensor([1.5, 1.0, -2.0, 0.5])
    ok, out = verdict(capsys, checks.check_repetition_penalty_prob, z.softmax(0)[0].item(), "repetition_penalty_prob")
    assert ok and "✓" in out
    divided_all = torch.tensor([1.5, 1.0, -0.5, 0.5])  # divides the negative logit too
    ok, out = verdict(capsys, checks.check_repetition_penalty_prob, divided_all.softmax(0)[0].item(),
                      "repetition_penalty_prob")
    assert not ok and "negative logit" in out
    no_penalty = torch.tensor([3.0, 1.0, -1.0, 0.5]).softmax(0)[0].item()
    assert not verdict(capsys, checks.check_repetition_penalty_prob, no_penalty, "repetition_penalty_prob")[0]


def test_beam_search_table(capsys):
    def brute_then_beam(log_probs, start, length, beam_width):  # an independent form: prune by rank in a dict
        beams = {(start,): 0.0}
        for _ in range(length):
            grown = {seq + (v,): s + log_probs[seq[-1]][v] for seq, s in beams.items() for v in range(len(log_probs))}
            beams = dict(sorted(grown.items(), key=lambda kv: kv[1], reverse=True)[:beam_width])
        return list(max(beams, key=beams.get)[1:])

    assert verdict(capsys, checks.check_beam_search_table, brute_then_beam, "beam_search_table")[0]

    def greedy(log_probs, start, length, beam_width):
        seq = [start]
        for _ in range(length):
            seq.append(max(range(len(log_probs)), key=lambda v: log_probs[seq[-1]][v]))
        return seq[1:]

    ok, out = verdict(capsys, checks.check_beam_search_table, greedy, "beam_search_table")
    assert not ok and "TOTAL" in out

    def best_per_beam(log_probs, start, length, beam_width):  # keeps each beam's own top continuations
        beams = [(0.0, [start])]
        for _ in range(length):
            beams = [c for s, seq in beams for c in sorted(
                [(s + log_probs[seq[-1]][v], seq + [v]) for v in range(len(log_probs))], key=lambda c: -c[0])[:1]]
            beams = sorted(beams, key=lambda c: -c[0])[:beam_width]
        return beams[0][1][1:]

    assert not verdict(capsys, checks.check_beam_search_table, best_per_beam, "beam_search_table")[0]

    def best_extension_of_each_beam(log_probs, start, length, beam_width):  # every token at first, then one each
        beams = [(0.0, [start])]
        for step in range(length):
            grown = [[(s + log_probs[seq[-1]][v], seq + [v]) for v in range(len(log_probs))] for s, seq in beams]
            candidates = grown[0] if step == 0 else [max(options, key=lambda c: c[0]) for options in grown]
            beams = sorted(candidates, key=lambda c: -c[0])[:beam_width]
        return beams[0][1][1:]

    ok, out = verdict(capsys, checks.check_beam_search_table, best_extension_of_each_beam, "beam_search_table")
    assert not ok and "second-best" in out

    def with_start(log_probs, start, length, beam_width):
        return [start] + brute_then_beam(log_probs, start, length, beam_width)

    assert not verdict(capsys, checks.check_beam_search_table, with_start, "beam_search_table")[0]


def test_exhaustive_beam_is_the_most_probable_sequence():
    from answer_keys.ch10 import _random_table, beam_search_table

    table = _random_table(5, 4)
    best = max(itertools.product(range(4), repeat=3),
               key=lambda s: sum(table[a][b] for a, b in zip((1,) + s, s, strict=False)))
    assert beam_search_table(table, 1, 3, 64) == list(best)


def test_typical_reference_matches_transformers():
    generation = pytest.importorskip("transformers.generation")
    from answer_keys.ch10 import typical_filter

    for seed, mass in itertools.product(range(4), (0.2, 0.5, 0.9, 0.99)):
        z = torch.randn(3, 40, generator=torch.Generator().manual_seed(seed)) * 2
        torch.testing.assert_close(typical_filter(z, mass), generation.TypicalLogitsWarper(mass)(None, z.clone()))


def test_typical_filter(capsys):
    from answer_keys.ch10 import typical_filter

    assert verdict(capsys, checks.check_typical_filter, typical_filter, "typical_filter")[0]

    def by_probability(logits, mass):  # that is top-p
        probs, order = logits.softmax(-1).sort(-1, descending=True)
        drop = (probs.cumsum(-1) - probs) >= mass
        return logits.masked_fill(drop.scatter(-1, order, drop), float("-inf"))

    ok, out = verdict(capsys, checks.check_typical_filter, by_probability, "typical_filter")
    assert not ok and "entropy" in out

    def stops_before_crossing(logits, mass):
        logp = logits.log_softmax(-1)
        dev = (-logp - (-(logp.exp() * logp).sum(-1, keepdim=True))).abs()
        dev_sorted, order = dev.sort(-1)
        drop = logp.exp().gather(-1, order).cumsum(-1) > mass
        drop[:, 0] = False
        return logits.masked_fill(drop.scatter(-1, order, drop), float("-inf"))

    assert not verdict(capsys, checks.check_typical_filter, stops_before_crossing, "typical_filter")[0]


def test_pareto_front(capsys):
    def good(points):  # an independent form: sort by x descending, sweep keeping the best y seen
        order = sorted(range(len(points)), key=lambda i: (-points[i][0], -points[i][1]))
        front, best_y, best_at_x = [], -math.inf, {}
        for i in order:
            x, y = points[i]
            if y > best_y or (y == best_y and best_at_x.get(y) == x):
                front.append(i)
                best_at_x[y] = x
                best_y = max(best_y, y)
        return sorted(front)

    assert verdict(capsys, checks.check_pareto_front, good, "pareto_front")[0]

    def strict_only(points):  # requires being better in both: keeps weakly dominated points
        return [i for i, (x, y) in enumerate(points) if not any(a > x and b > y for a, b in points)]

    ok, out = verdict(capsys, checks.check_pareto_front, strict_only, "pareto_front")
    assert not ok and "still dominates" in out

    def drops_duplicates(points):
        return sorted({tuple(p): i for i, p in enumerate(points)
                       if not any(a >= p[0] and b >= p[1] and (a, b) != tuple(p) for a, b in points)}.values())

    ok, out = verdict(capsys, checks.check_pareto_front, drops_duplicates, "pareto_front")
    assert not ok and "equal points" in out
