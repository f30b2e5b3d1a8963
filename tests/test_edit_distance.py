"""lmbook.edit_distance against rapidfuzz (Levenshtein with integer weights, OSA) and against brute force
(applying the alignment's edits must turn a into b at the reported cost)."""

import random
from functools import lru_cache

import pytest
from lmbook.edit_distance import edit_alignment, edit_table, levenshtein, osa_distance, suggest
from rapidfuzz.distance import OSA, DamerauLevenshtein, Levenshtein

WEIGHTS = [(1, 1, 1), (1, 1, 2), (2, 3, 1), (3, 1, 4), (1, 2, 5), (0, 1, 1)]


def random_pairs(seed, n=300, alphabet="abc", max_len=8):
    """Short strings over a small alphabet: many repeated letters, so many tied alignments."""
    rng = random.Random(seed)
    word = lambda: "".join(rng.choice(alphabet) for _ in range(rng.randint(0, max_len)))  # noqa: E731
    return [(word(), word()) for _ in range(n)]


@pytest.mark.parametrize("weights", WEIGHTS)
def test_levenshtein_matches_rapidfuzz_with_weights(weights):
    ins, dele, sub = weights
    for a, b in random_pairs(sum(weights)):
        assert levenshtein(a, b, insert=ins, delete=dele, substitute=sub) == Levenshtein.distance(
            a, b, weights=(ins, dele, sub)), (a, b)


def test_levenshtein_on_token_lists_matches_rapidfuzz():
    rng = random.Random(7)
    words = ["the", "cat", "sat", "on", "mat"]
    for _ in range(200):
        a = [rng.choice(words) for _ in range(rng.randint(0, 6))]
        b = [rng.choice(words) for _ in range(rng.randint(0, 6))]
        assert levenshtein(a, b) == Levenshtein.distance(a, b)
        assert osa_distance(a, b) == OSA.distance(a, b)


def test_osa_matches_rapidfuzz_and_differs_from_unrestricted_damerau():
    for a, b in random_pairs(3, n=1000, alphabet="abcd", max_len=7):
        assert osa_distance(a, b) == OSA.distance(a, b), (a, b)
    assert osa_distance("ca", "abc") == 3 == OSA.distance("ca", "abc")
    assert DamerauLevenshtein.distance("ca", "abc") == 2  # unrestricted: swap, then insert between
    assert osa_distance("form", "from") == 1 and levenshtein("form", "from") == 2


def test_float_weights_match_brute_force_recursion():
    """rapidfuzz truncates float weights, so the oracle for float costs is the recursive definition."""

    def brute(a, b, ins, dele, sub):
        @lru_cache(maxsize=None)
        def d(i, j):
            if i == 0:
                return j * ins
            if j == 0:
                return i * dele
            diagonal = d(i - 1, j - 1) + (0 if a[i - 1] == b[j - 1] else sub)
            return min(d(i - 1, j) + dele, d(i, j - 1) + ins, diagonal)

        return d(len(a), len(b))

    for a, b in random_pairs(11, n=200):
        got = levenshtein(a, b, insert=0.5, delete=1.25, substitute=1.5)
        assert isinstance(got, float)
        assert got == pytest.approx(brute(a, b, 0.5, 1.25, 1.5), abs=1e-12)


@pytest.mark.parametrize("weights", WEIGHTS)
def test_alignment_turns_a_into_b_at_the_distance_cost(weights):
    ins, dele, sub = weights
    cost = {"match": 0, "substitute": sub, "delete": dele, "insert": ins}
    for a, b in random_pairs(99 + ins, n=200):
        steps = edit_alignment(a, b, insert=ins, delete=dele, substitute=sub)
        assert sum(cost[s.op] for s in steps) == levenshtein(a, b, insert=ins, delete=dele, substitute=sub)
        # replaying the steps: keep/replace/skip items of a, add items of b, in order
        out = [s.b_item for s in steps if s.op in ("match", "substitute", "insert")]
        assert "".join(out) == b
        assert "".join(s.a_item for s in steps if s.op != "insert") == a
        for s in steps:
            if s.op in ("match", "substitute"):
                assert a[s.i] == s.a_item and b[s.j] == s.b_item
                assert (s.a_item == s.b_item) == (s.op == "match")


def test_alignment_with_float_costs_that_do_not_add_up_exactly():
    # 6 * 0.1 != 0.5 + 0.1 in floating point: an exact-equality backtrace found no step here and crashed
    assert [s.op for s in edit_alignment("abcabc", "", insert=0.2, delete=0.1, substitute=1.1)] == ["delete"] * 6
    steps = edit_alignment("cbccbb", "a", insert=0.3, delete=0.3, substitute=0.7)
    assert sum({"match": 0, "substitute": 0.7, "delete": 0.3, "insert": 0.3}[s.op] for s in steps) == \
        pytest.approx(levenshtein("cbccbb", "a", insert=0.3, delete=0.3, substitute=0.7))
    for ins, dele, sub in [(0.1, 0.2, 0.3), (0.3, 0.1, 0.2), (0.2, 0.3, 0.1)]:
        cost = {"match": 0, "substitute": sub, "delete": dele, "insert": ins}
        for a, b in random_pairs(5, n=300):
            steps = edit_alignment(a, b, insert=ins, delete=dele, substitute=sub)
            assert "".join(s.b_item for s in steps if s.op != "delete") == b
            assert "".join(s.a_item for s in steps if s.op != "insert") == a
            assert sum(cost[s.op] for s in steps) == pytest.approx(
                levenshtein(a, b, insert=ins, delete=dele, substitute=sub), abs=1e-9)


def test_the_carr_example_and_its_three_way_tie():
    expected = {"cat": 2, "car": 1, "cart": 1, "care": 1, "cards": 2, "cast": 2}  # E11, not the seed's 3/1/2
    assert {w: levenshtein("carr", w) for w in expected} == expected
    ops = [(s.op, s.a_item, s.b_item) for s in edit_alignment("carr", "cart") if s.op != "match"]
    assert ops == [("substitute", "r", "t")]
    assert [s.op for s in edit_alignment("carr", "car")].count("delete") == 1
    counts = {"cat": 50, "car": 30, "cart": 5, "care": 40, "cards": 3, "cast": 8}
    assert [w for w, _, _ in suggest("carr", counts, k=3)] == ["care", "car", "cart"]  # ties by frequency
    assert suggest("carr", counts, k=10, max_distance=1) == [("care", 1, 40), ("car", 1, 30), ("cart", 1, 5)]


def test_edit_table_borders_and_corner():
    D = edit_table("carr", "cart", insert=2, delete=3)
    assert D.shape == (5, 5)
    assert D[:, 0].tolist() == [0, 3, 6, 9, 12] and D[0, :].tolist() == [0, 2, 4, 6, 8]
    assert D[-1, -1] == levenshtein("carr", "cart", insert=2, delete=3) == 1
    assert levenshtein("", "") == 0 and levenshtein("", "abc") == 3 and levenshtein("abc", "") == 3


@pytest.mark.parametrize(
    "call, error, words",
    [
        (lambda: levenshtein(123, "abc"), TypeError, ["a", "str", "int"]),
        (lambda: levenshtein("abc", None), TypeError, ["b", "NoneType"]),
        (lambda: levenshtein("a", "b", insert=-1), ValueError, ["insert", ">= 0", "-1"]),
        (lambda: levenshtein("a", "b", substitute="2"), TypeError, ["substitute", "str"]),
        (lambda: levenshtein("a", "b", delete=float("inf")), ValueError, ["delete", "finite"]),
        (lambda: osa_distance("a", 5), TypeError, ["b", "int"]),
        (lambda: suggest("carr", {}), ValueError, ["word_counts", "non-empty"]),
        (lambda: suggest("carr", {"car": 1}, k=0), ValueError, ["k", "0"]),
        (lambda: suggest(["c", "a"], {"car": 1}), TypeError, ["word", "list"]),
    ],
)
def test_bad_input_names_the_argument(call, error, words):
    with pytest.raises(error) as info:
        call()
    for w in words:
        assert w in str(info.value)
