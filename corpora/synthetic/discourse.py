"""Per-document state and the choices every document type makes: mentions, introductions, names.

Entities are introduced once (``a young weaver named Delima``, ``the mill``, ``two cups of
flour``) and mentioned later by name, definite description (``the weaver``) or pronoun. Three
rules keep every mention unambiguous, which is what makes scoring exact:

* a new entity's noun is one not yet used in the document (probabilities renormalised over the
  unused ones), so ``the weaver`` names one entity;
* a new name's first syllable is one not yet used by another name of the document, so names are
  distinct and none is the start of another;
* a pronoun can only mean the most recently mentioned entity of its class (she / he / it).

Introducing a new entity and mentioning an old one are options of the same choice, so the first
step of an introduction (article with adjective or with noun) is merged into the mention menu and
the rest follows as further choices. ``lead`` says how the first unit starts (see FIRST etc.).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from corpora.synthetic.chooser import Menu
from corpora.synthetic.render import MARK, cap, pronoun_class

FIRST = ("", True)        # first unit of a record, right after its separator: capitalised, no mark
NEXT = (MARK + " ", False)  # a later unit of a record
TURN = (MARK + " ", True)   # first unit after a speaker label
CONT = (" ", False)       # continues the current unit after a space ("and two cups of salt")


def surface(lead: tuple[str, bool], text: str) -> str:
    return lead[0] + (cap(text) if lead[1] else text)


@dataclass(frozen=True)
class Intro:
    """How a kind of entity is introduced: its render style and the world categories it draws from."""
    kind: str               # person / place / thing (decides pronouns and wh-words)
    style: str              # named / indef / def / proper / qty / bare (see Renderer.intro)
    nouns: str              # World attribute of the nouns (the names, for 'proper')
    modifiers: str | None = None  # optional adjectives (named, indef) or the compound (bare)


PERSON = Intro("person", "named", "professions", "person_adjectives")
SETTLEMENT = Intro("place", "named", "settlements", "place_adjectives")
WATER = Intro("place", "named", "waters")
PLACE = Intro("place", "def", "places")
REGION = Intro("place", "proper", "regions")
THING = Intro("thing", "indef", "things", "thing_adjectives")
LANDMARK = Intro("thing", "indef", "landmarks", "place_adjectives")
TOOL = Intro("thing", "def", "tools")
INGREDIENT = Intro("thing", "qty", "ingredients")
DISH = Intro("thing", "bare", "dish_kinds", "goods")
UNIQUE_NOUNS = ("named", "indef", "def", "proper", "qty")


class Discourse:
    def __init__(self, world, chooser):
        self.world, self.cfg, self.ch, self.R = world, world.cfg, chooser, world.english
        self.ents: dict[str, dict] = {}
        self.records: list[dict] = []
        self.used: dict[str, set] = {}  # world category -> its words already used for an entity
        self.first_syllables: set[str] = set()  # of this document's names
        self.salient: dict[str, str] = {}
        self.location: dict[str, str] = {}
        self.holder: dict[str, str | None] = {}
        self.filtered: dict[tuple, tuple[int, Menu]] = {}  # intro menus restricted to unused nouns

    # -- records
    def add(self, rec: dict) -> dict:
        self.records.append(rec)
        return rec

    def say(self, rec: dict, emitted: str = "") -> dict:
        """A record whose rest is determined; ``emitted`` is the part a choice already wrote."""
        marked = self.R.record(rec, self.ents)
        assert marked.startswith(emitted), (marked, emitted)
        self.ch.emit(marked[len(emitted):])
        return self.add(rec)

    def of_kind(self, kind: str, style: str | None = None) -> list[str]:
        return [e["id"] for e in self.ents.values() if e["kind"] == kind and style in (None, e["style"])]

    def plain(self, ref: dict) -> dict:
        """The fixed mention used in questions and answers: the name, else the description."""
        if "id" not in ref:
            return ref
        return {"id": ref["id"], "form": "name" if "name" in self.ents[ref["id"]] else "desc"}

    # -- words
    def memo(self, key, build) -> Menu:
        """A menu that depends on the world only, built once per world (never mutate it)."""
        menu = self.world.memo.get(key)
        if menu is None:
            menu = self.world.memo[key] = build()
        return menu

    def word_menu(self, attr: str, lead, template: str = "{}", tag: tuple = ()) -> Menu:
        """All words of a world category, formatted by ``template``; values are the words (or tag + (word,))."""
        def build():
            cat, menu = getattr(self.world, attr), Menu()
            for w, lp in zip(cat.words, cat.logps):
                menu.add(surface(lead, template.format(" ".join(w) if isinstance(w, tuple) else w)), lp,
                         tag + (w,) if tag else w)
            return menu
        return self.memo(("words", attr, lead, template, tag), build)

    def unused(self, attr: str) -> list[tuple[str, float]]:
        """The category's words not yet used in this document, with renormalised log-probabilities."""
        cat, used = getattr(self.world, attr), self.used.get(attr, ())
        if not used:
            return list(zip(cat.words, cat.logps))
        shift = self.unused_shift(attr)
        return [] if shift is None else [(w, lp + shift) for w, lp in zip(cat.words, cat.logps) if w not in used]

    def unused_shift(self, attr: str) -> float | None:
        """-log of the probability mass left to a category's unused words (None if none is left)."""
        cat = getattr(self.world, attr)
        left = 1.0 - math.fsum(cat.probs[cat.index[w]] for w in self.used.get(attr, ()))
        return None if left <= 1e-12 else -math.log(left)

    def pick_word(self, options: list[tuple[str, float]], template: str) -> str:
        menu = Menu()
        for w, lp in options:
            menu.add(template.format(w), lp, w)
        return self.ch.pick(menu)

    # -- mentions
    def forms(self, eid: str, case: str) -> list[tuple[str, str, float]]:
        ent, pd, pp = self.ents[eid], self.cfg.description_prob, self.cfg.pronoun_prob
        out = []
        if "name" in ent:
            out.append(("name", ent["name"], 1.0 - pd - pp))
        if ent["style"] != "proper":
            out.append(("desc", self.R.desc(ent), pd))
        cls = pronoun_class(ent)
        if cls and self.salient.get(cls) == eid:
            out.append(("pron", self.R.pronoun(ent, case), pp))
        total = sum(w for _, _, w in out)
        return [(form, text, math.log(w / total)) for form, text, w in out]

    def can_introduce(self, intro: Intro) -> bool:
        if intro.style in UNIQUE_NOUNS and self.unused_shift(intro.nouns) is None:
            return False
        return intro.style != "named" or len(self.first_syllables) < len(self.world.syllables.words)

    def can_refer(self, candidates, new) -> bool:
        """Whether a mention menu would have any option."""
        return bool(candidates) or any(self.can_introduce(intro) for _, intro in new)

    def ref_menu(self, candidates, lead, case: str = "obj", marker: str = "", new=(), new_prob=None) -> Menu:
        """Mentions of the candidates (ids, or (id, weight) pairs) and first steps of new entities.

        ``new`` lists (weight, Intro); a new entity is chosen with probability ``new_prob``
        (default new_entity_prob) when there are also candidates, always when there are none.
        """
        pairs = [c if isinstance(c, tuple) else (c, 1.0) for c in candidates]
        intros = [(w, intro) for w, intro in new if self.can_introduce(intro)]
        new_prob = self.cfg.new_entity_prob if new_prob is None else new_prob
        p_new = 0.0 if not intros else (1.0 if not pairs else new_prob)
        prefix = f"{marker} " if marker else ""
        menu = Menu()
        total = sum(w for _, w in pairs)
        for eid, w in pairs:
            base = math.log((1.0 - p_new) * w / total)
            for form, text, lp in self.forms(eid, case):
                menu.add(surface(lead, prefix + text), base + lp, ("old", eid, form))
        total = sum(w for w, _ in intros)
        for w, intro in intros:
            menu.extend(self.intro_menu(intro, lead, prefix), math.log(p_new * w / total))
        return menu

    def refer(self, candidates, lead, case: str = "obj", marker: str = "", new=()) -> dict:
        return self.resolve(self.ch.pick(self.ref_menu(candidates, lead, case, marker, new)))

    def resolve(self, value) -> dict:
        """The ref of a picked mention option (finishing an introduction), now the salient one."""
        ref = {"id": value[1], "form": value[2]} if value[0] == "old" else self.introduce(*value[1:])
        cls = pronoun_class(self.ents[ref["id"]])
        if cls:
            self.salient[cls] = ref["id"]
        return ref

    # -- introductions
    def intro_menu(self, intro: Intro, lead, prefix: str) -> Menu:
        """First steps of introducing an entity; noun options are limited to the unused nouns."""
        key = ("intro", intro, lead, prefix)
        menu = self.memo(key, lambda: self._all_intros(intro, lead, prefix))
        used = self.used.get(intro.nouns)
        if not used or intro.style not in UNIQUE_NOUNS:
            return menu
        n_used, subset = self.filtered.get(key, (0, None))
        if n_used != len(used):  # nouns are only ever added to `used`, so its size tells its state
            shift = self.unused_shift(intro.nouns)
            keep = [i for i, v in enumerate(menu.values) if v[2] != "noun" or v[3] not in used]
            subset = menu.subset(keep, [shift if menu.values[i][2] == "noun" else 0.0 for i in keep])
            self.filtered[key] = (len(used), subset)
        return subset

    def _all_intros(self, intro: Intro, lead, prefix: str) -> Menu:
        if intro.style == "qty":
            return self.word_menu("numbers", lead, prefix + "{}", tag=("new", intro, "num"))
        if intro.style == "bare":
            return self.word_menu("goods", lead, prefix + "{}", tag=("new", intro, "mod"))
        menu, nouns = Menu(), getattr(self.world, intro.nouns)
        if intro.style in ("proper", "def"):
            template = prefix + ("{}" if intro.style == "proper" else "the {}")
            for noun, lp in zip(nouns.words, nouns.logps):
                menu.add(surface(lead, template.format(noun)), lp, ("new", intro, "noun", noun))
            return menu
        p_adj = self.cfg.adjective_prob if intro.modifiers else 0.0
        if p_adj:
            cat = getattr(self.world, intro.modifiers)
            for adj, lp in zip(cat.words, cat.logps):
                text = f"{prefix}{self.R.article(adj)} {adj}"
                menu.add(surface(lead, text), lp + math.log(p_adj), ("new", intro, "adj", adj))
        for noun, lp in zip(nouns.words, nouns.logps):
            text = f"{prefix}{self.R.article(noun)} {noun}"
            menu.add(surface(lead, text), lp + math.log1p(-p_adj), ("new", intro, "noun", noun))
        return menu

    def introduce(self, intro: Intro, step: str, word: str) -> dict:
        ent = {"id": f"e{len(self.ents) + 1}", "form": "new", "kind": intro.kind, "style": intro.style}
        if step == "noun":
            noun = word
        elif step == "num":
            units = self.world.units
            unit = self.pick_word([(u[0] if word == "one" else u[1], lp) for u, lp in zip(units.words, units.logps)],
                                  " {}")
            ent["qty"] = [word, unit]
            noun = self.pick_word(self.unused(intro.nouns), " of {}")
        else:  # an adjective or compound came first; the noun continues the same unit
            ent["adj"] = word
            nouns = getattr(self.world, intro.nouns)
            noun = self.pick_word(self.unused(intro.nouns) if intro.style in UNIQUE_NOUNS else
                                  list(zip(nouns.words, nouns.logps)), " {}")
        self.used.setdefault(intro.nouns, set()).add(noun)
        ent["name" if intro.style == "proper" else "noun"] = noun
        if intro.style == "named":
            self.ch.emit(" named ")
            ent["name"] = self.name()
            if intro.kind == "person":
                ent["pron"] = "she" if ent["name"][-1] in "aei" else "he"
        self.ents[ent["id"]] = ent
        return ent

    def name(self) -> str:
        """A fresh name: strict CV syllables, the first one unused in this document."""
        used, syl, stop = self.first_syllables, self.world.syllables, self.cfg.name_stop_prob
        first = self.memo(("first syllables",), lambda: Menu([cap(s) for s in syl.words], syl.logps, syl.words))
        if used:
            shift = -math.log(1.0 - math.fsum(syl.probs[syl.index[s]] for s in used))
            keep = [i for i, s in enumerate(syl.words) if s not in used]
            first = first.subset(keep, [shift] * len(keep))
        parts = [self.ch.pick(first, open_word=True)]
        used.add(parts[0])
        more = self.memo(("syllables",), lambda: Menu(syl.words, syl.logps, syl.words))
        more_or_stop = self.memo(("syllables or stop",), lambda: Menu.mix([(stop, Menu([""], [0.0], [""])),
                                                                            (1 - stop, more)]))
        while len(parts) < self.cfg.name_max_syllables:
            s = self.ch.pick(more_or_stop if len(parts) >= self.cfg.name_min_syllables else more, open_word=True)
            if not s:
                break
            parts.append(s)
        return cap("".join(parts))
