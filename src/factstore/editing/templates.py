"""The sentence templates of the editing study: "The author of {book} is {author}" and 31 paraphrases.

Every template holds "{book}" once and "{author}" once, with "{author}" the very last thing in
the sentence: the author token is the answer a causal language model predicts from everything
before it, so nothing may follow it (not even a full stop). The templates are written for this
project, in plain ASCII, with varied wording so that held-out paraphrases test whether a fact is
stored independently of one phrasing.

The editing study rewrites each fact through one seen template drawn at random per fact
(factstore.editing.protocol.edit_templates). The held-out paraphrases are the LAST templates of
the tuple, so a split is deterministic and readable off the list.
"""

from __future__ import annotations

TEMPLATES: tuple[str, ...] = (
    "The author of {book} is {author}",
    "Who wrote {book}? The author is {author}",
    "{book} was written by {author}",
    "The novel {book} is a work by {author}",
    "{book} is a book by {author}",
    "The book {book} was written by {author}",
    "If you enjoyed {book}, thank its author, {author}",
    "The writer behind {book} is {author}",
    "{book} comes from the pen of {author}",
    "Readers of {book} know that it was written by {author}",
    "The person who wrote {book} is {author}",
    "On the cover of {book} you will find the name {author}",
    "{book} was authored by {author}",
    "Credit for writing {book} goes to {author}",
    "Question: who is the author of {book}? Answer: {author}",
    "The title {book} belongs to the author {author}",
    "Looking for the author of {book}? It is {author}",
    "{book}, a book written by {author}",
    "Published under the title {book}, this book is by {author}",
    "The book called {book} has as its author {author}",
    "Many readers know {book}, which was written by {author}",
    "The creator of the book {book} is the writer {author}",
    "In the library catalogue, {book} is listed under {author}",
    "{book} is one of the books by {author}",
    "Ask who wrote {book} and you will hear {author}",
    "According to the catalogue, the author of {book} is {author}",
    "The story {book} was penned by {author}",
    "Behind the book {book} stands its author, {author}",
    "Book: {book}. Author: {author}",
    "Anyone who has read {book} knows its author: {author}",
    "The words of {book} were written by {author}",
    "For {book}, the name on the cover is {author}",
)

def split_templates(n_held_out: int) -> tuple[list[int], list[int]]:
    """(seen, held_out) template indices: the last `n_held_out` templates are held out as
    paraphrases never trained on, the others are seen. n_held_out in [1, len(TEMPLATES) - 1], so
    both parts are non-empty."""
    if isinstance(n_held_out, bool) or not isinstance(n_held_out, int) \
            or not 1 <= n_held_out <= len(TEMPLATES) - 1:
        raise ValueError(f"n_held_out must be an integer in [1, {len(TEMPLATES) - 1}], got {n_held_out!r}")
    n_seen = len(TEMPLATES) - n_held_out
    return list(range(n_seen)), list(range(n_seen, len(TEMPLATES)))
