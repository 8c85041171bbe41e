"""ThinkTagParser: reasoning split out of the content stream, whatever the chunk boundaries."""

from __future__ import annotations

import itertools
import random

import pytest

from chat.agent.thinking import TEXT, THINKING, ThinkTagParser


def parse(chunks, **options) -> list[tuple[str, str]]:
    parser = ThinkTagParser(**options)
    pieces = []
    for chunk in chunks:
        pieces += parser.feed(chunk)
    return pieces + parser.flush()


def joined(pieces, kind) -> str:
    return "".join(content for k, content in pieces if k == kind)


def normalised(pieces):
    """Adjacent pieces of one kind joined (how a stream is cut is not the contract)."""
    out: list[tuple[str, str]] = []
    for kind, content in pieces:
        if out and out[-1][0] == kind:
            out[-1] = (kind, out[-1][1] + content)
        else:
            out.append((kind, content))
    return out


def test_whole_string():
    assert parse(["a<think>b</think>c"]) == [(TEXT, "a"), (THINKING, "b"), (TEXT, "c")]


@pytest.mark.parametrize("split", range(len("a<think>b</think>c") + 1))
def test_tags_split_at_every_position(split):
    source = "a<think>b</think>c"
    pieces = parse([source[:split], source[split:]])
    assert normalised(pieces) == [(TEXT, "a"), (THINKING, "b"), (TEXT, "c")]
    assert all(content for _, content in pieces), "no empty pieces"


def test_tags_split_at_every_pair_of_positions():
    source = "x<think>yy</think>z"
    for i, j in itertools.combinations(range(len(source) + 1), 2):
        pieces = parse([source[:i], source[i:j], source[j:]])
        assert normalised(pieces) == [(TEXT, "x"), (THINKING, "yy"), (TEXT, "z")], (i, j)


def test_one_character_at_a_time():
    source = "<think>plan</think>answer <b>bold</b>"
    assert normalised(parse(list(source))) == [(THINKING, "plan"), (TEXT, "answer <b>bold</b>")]


def test_several_tag_pairs():
    pieces = parse(["one<think>t1</think>two<think>t2</think>three"])
    assert pieces == [(TEXT, "one"), (THINKING, "t1"), (TEXT, "two"), (THINKING, "t2"), (TEXT, "three")]


def test_custom_tag_pairs():
    tags = (("<think>", "</think>"), ("<reasoning>", "</reasoning>"))
    pieces = parse(["a<reasoning>r</reasoning>b<think>t</think>c"], tags=tags)
    assert pieces == [(TEXT, "a"), (THINKING, "r"), (TEXT, "b"), (THINKING, "t"), (TEXT, "c")]


def test_a_closer_of_another_pair_does_not_close():
    tags = (("<think>", "</think>"), ("<r>", "</r>"))
    assert parse(["<r>x</think>y</r>z"], tags=tags) == [(THINKING, "x</think>y"), (TEXT, "z")]


def test_start_in_thinking():
    parser = ThinkTagParser(start_in_thinking=True)
    assert parser.in_thinking
    pieces = parser.feed("reasoning</th") + parser.feed("ink>answer") + parser.flush()
    assert pieces == [(THINKING, "reasoning"), (TEXT, "answer")]
    assert not parser.in_thinking


def test_blank_lines_after_the_closing_tag_are_dropped():
    assert parse(["<think>t</think>", "\n", "\n  Answer\n"]) == [(THINKING, "t"), (TEXT, "Answer\n")]


def test_held_tail_that_was_not_a_tag_is_flushed_as_text():
    parser = ThinkTagParser()
    assert parser.feed("x <th") == [(TEXT, "x ")]  # "<th" might start a tag: held
    assert parser.flush() == [(TEXT, "<th")]
    assert parser.flush() == []  # nothing twice


def test_held_tail_released_when_the_next_chunk_settles_it():
    parser = ThinkTagParser()
    assert parser.feed("1 <") == [(TEXT, "1 ")]
    assert parser.feed("2") == [(TEXT, "<2")]


def test_unclosed_thinking_is_flushed_as_thinking():
    assert normalised(parse(["<think>never closed </thi"])) == [(THINKING, "never closed </thi")]


def test_text_without_tags_passes_through_unchanged():
    assert parse(["plain ", "text < 3 > 2"]) == [(TEXT, "plain "), (TEXT, "text < 3 > 2")]


def test_at_least_one_tag_pair_is_needed():
    with pytest.raises(ValueError):
        ThinkTagParser(tags=())


@pytest.mark.parametrize("seed", range(30))
def test_nothing_lost_or_duplicated_under_random_splits(seed):
    rng = random.Random(seed)
    source = "Intro <think>step 1 < step 2</think>\n\nMiddle <<think>again</think>End </thin <th"
    cuts = sorted(rng.sample(range(1, len(source)), rng.randint(1, 12)))
    chunks = [source[i:j] for i, j in zip([0, *cuts], [*cuts, len(source)])]
    pieces = parse(chunks)
    assert joined(pieces, THINKING) == "step 1 < step 2again"
    assert joined(pieces, TEXT) == "Intro Middle <End </thin <th"
    assert normalised(pieces) == [
        (TEXT, "Intro "),
        (THINKING, "step 1 < step 2"),
        (TEXT, "Middle <"),
        (THINKING, "again"),
        (TEXT, "End </thin <th"),
    ]


def test_whitespace_opening_a_thinking_block_is_dropped_and_an_empty_block_leaves_nothing():
    # Qwen3 with thinking off still sends an empty block: no thinking, no blank answer start.
    assert parse(["<think>\n\n</think>\n\n", "Answer"]) == [(TEXT, "Answer")]
    assert parse(["<think>", "\n", " plan\n", "</think>ok"]) == [(THINKING, "plan\n"), (TEXT, "ok")]
    parser = ThinkTagParser(start_in_thinking=True)
    assert parser.feed("\nplan</think>x") == [(THINKING, "plan"), (TEXT, "x")]
