"""Rule-based grammar errors for English referring expressions.

R2-Bench makes its grammar errors with a large language model; we cannot ship or call one,
so these are hand-written rules with no part-of-speech tagger, no dictionary download and no
randomness of their own. :func:`grammar_errors` lists the wrong forms one word can take; the
perturbation picks one with a seeded draw. The kinds of error:

* agreement: ``is`` <-> ``are``, ``was`` <-> ``were``, ``has`` <-> ``have``, ``does`` <->
  ``do``, ``this`` <-> ``these``, ``that`` <-> ``those``; a final ``-s`` dropped or added;
* tense: ``is`` -> ``was``, ``are`` -> ``were``, ``has`` / ``have`` -> ``had``, ``-ing`` ->
  ``-ed``, ``-ed`` -> ``-ing``;
* articles: ``a`` -> ``an`` / ``the``, ``an`` -> ``a`` / ``the``, ``the`` -> ``a`` / ``an``;
* plurals: a plural ``-s`` / ``-es`` / ``-ies`` dropped, a singular word given ``-s`` /
  ``-es`` / ``-ies`` (regular rules only);
* word forms: ``-ly`` dropped from adverbs, ``-ly`` added to short adjectives of the
  referring vocabulary (colours, sizes, positions).

Words of one or two letters outside these lists, and the small set of
:data:`FUNCTION_WORDS` (prepositions, pronouns, conjunctions), take no error: they are not
"applicable", and the severity's fraction counts applicable words only.
"""

from __future__ import annotations

LEXICON: dict[str, tuple[str, ...]] = {
    # Verbs: number and tense.
    "is": ("are", "was", "be"), "are": ("is", "were", "be"), "was": ("were", "is"), "were": ("was", "are"),
    "has": ("have", "had"), "have": ("has", "had"), "does": ("do", "did"), "do": ("does", "did"),
    # Determiners: number, and the articles for one another.
    "this": ("these",), "these": ("this",), "that": ("those",), "those": ("that",),
    "a": ("an", "the"), "an": ("a", "the"), "the": ("a", "an"), "one": ("ones",),
    # Irregular nouns: wrong plurals and possessives, each form for the other.
    "man": ("mans", "men's"), "men": ("mens", "man"), "woman": ("womans", "women"), "women": ("womens", "woman"),
    "person": ("persons", "peoples"), "people": ("peoples", "person"),
    "child": ("childs", "children"), "children": ("childrens", "child"),
}
"""Irregular and function words with their wrong forms."""

FUNCTION_WORDS = frozenset(
    (
        "of", "in", "on", "at", "to", "by", "for", "from", "with", "and", "or", "but", "not", "no", "nor",
        "than", "then", "as", "if", "so", "up", "out", "off", "over", "under", "into", "onto", "near", "next",
        "behind", "between", "above", "below", "beside", "besides", "across", "along", "around", "through",
        "it", "its", "he", "she", "him", "his", "her", "hers", "they", "them", "their", "theirs", "we", "us",
        "our", "you", "your", "i", "me", "my", "mine", "who", "whom", "which", "what", "where", "when",
        "there", "here", "very", "also", "just", "only", "each", "every", "some", "any", "all", "both",
        "either", "neither",
    )
)
"""Words that take no error (prepositions, pronouns, conjunctions, a few adverbs)."""

ADJECTIVES_TAKING_LY = frozenset(
    (
        "red", "blue", "green", "yellow", "white", "black", "brown", "orange", "pink", "purple", "grey",
        "gray", "dark", "light", "bright", "big", "small", "large", "tiny", "tall", "short", "long", "wide",
        "narrow", "round", "left", "right", "top", "bottom", "close", "far", "first", "last", "second",
        "third", "middle", "quick", "slow", "soft", "hard",
    )
)
"""Adjectives of referring expressions that the word-form rule turns into ``-ly`` adverbs."""

_SIBILANT_ENDINGS = ("s", "x", "z", "ch", "sh")
_VOWELS = "aeiou"


def _pluralised(word: str) -> str:
    lowered = word.lower()
    if lowered.endswith(_SIBILANT_ENDINGS):
        return word + "es"
    if lowered.endswith("y") and len(word) > 1 and lowered[-2] not in _VOWELS:
        return word[:-1] + "ies"
    return word + "s"


def _singularised(word: str) -> str | None:
    lowered = word.lower()
    if lowered.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if lowered.endswith("es") and lowered[:-2].endswith(_SIBILANT_ENDINGS) and len(word) > 4:
        return word[:-2]
    if lowered.endswith("s") and not lowered.endswith(("ss", "us", "is")) and len(word) > 3:
        return word[:-1]
    return None


def _match_case(original: str, replacement: str) -> str:
    if original.isupper() and len(original) > 1:
        return replacement.upper()
    if original[:1].isupper():
        return replacement[:1].upper() + replacement[1:]
    return replacement


def grammar_errors(word: str) -> tuple[str, ...]:
    """The wrong forms of ``word`` (a run of letters), each different from it; empty if none apply.

    Suffix rules edit the word as written, so an acronym keeps its case (``AI`` -> ``AIs``).
    """
    lowered = word.lower()
    if lowered in LEXICON:
        candidates = [_match_case(word, form) for form in LEXICON[lowered]]
    elif lowered in FUNCTION_WORDS or len(word) < 3:
        return ()
    else:
        candidates = []
        singular = _singularised(word)
        if lowered.endswith("ing") and len(word) > 5:
            candidates += [word[:-3] + "ed", word[:-3] + "s"]
        elif lowered.endswith("ed") and len(word) > 4:
            candidates += [word[:-2] + "ing", word[:-2] + "s"]
        elif lowered.endswith("ly") and len(word) > 4:
            candidates.append(word[:-2])
        elif singular is not None:
            candidates.append(singular)
        else:
            candidates.append(_pluralised(word))
            if lowered in ADJECTIVES_TAKING_LY:
                candidates.append(word + "ly")
    unique = dict.fromkeys(c for c in candidates if c and c != word)
    return tuple(unique)
