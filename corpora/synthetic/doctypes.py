"""The four document types, each a process of choices over a :class:`Discourse`.

* **story** — a hero is introduced with a home, then sentences ``[opener,] subject verb args.``
  whose options follow a world state (who is where, who holds what: you can only give what you
  hold, to someone in the same place), and a closing paragraph restating where the hero ended up.
* **entry** — an encyclopedia entry about a town: facts in random order, then ``Questions.`` with
  each question answered by repeating, verbatim, the phrase of the earlier fact.
* **recipe** — a dish with a compound name, a list of ingredients, steps that use the listed
  ingredients (unused ones preferred), and ``Finally, serve`` the dish named in the title.
* **dialogue** — two people greet, say where they put things, ask where things are (the answer is
  the last place said), and say goodbye by name.

Each process writes its records into the discourse and ends with the end-of-document event.
The first choice of a document is its type; its options are the types' distinct first units.
"""
from __future__ import annotations

import math

from corpora.synthetic.chooser import END, Menu
from corpora.synthetic.discourse import (CONT, DISH, FIRST, INGREDIENT, LANDMARK, NEXT, PERSON, PLACE, REGION,
                                          SETTLEMENT, THING, TOOL, TURN, WATER, Discourse, surface)
from corpora.synthetic.render import FRAMES, MARK, cap

OPENINGS = {"story": "Once upon a time,", "entry": "This entry is about", "recipe": "How to make",
            "dialogue": "In this talk,"}
# verb -> (what each argument is, the state change)
STORY_VERBS = {
    "slept": ((), None), "waited": ((), None), "laughed": ((), None), "felt": (("emotion",), None),
    "walked": (("place",), "move"), "ran": (("place",), "move"), "rode": (("place",), "move"),
    "met": (("person",), "meet"), "greeted": (("present",), None),
    "found": (("new_thing",), "take"), "made": (("new_thing",), "take"), "bought": (("new_thing",), "take"),
    "saw": (("thing",), None), "gave": (("held", "present"), "give"), "showed": (("held", "present"), None),
    "lost": (("held",), "drop"), "carried": (("held", "place"), "move"), "visited": (("place",), "move"),
    "sold": (("held", "present"), "give"), "thanked": (("present",), None), "helped": (("present",), None),
    "fixed": (("thing",), None), "painted": (("thing",), None), "dropped": (("held",), "drop"),
    "danced": ((), None), "cried": ((), None), "called": (("other",), None),
}
STORY_KINDS = ("place", "person", "present", "new_thing", "thing", "held", "other")
ENTRY_RELATIONS = {"lies": ("region",), "stands": ("water",), "was founded": ("person",), "is ruled": ("person",),
                   "is known": ("goods",), "trades": ("goods", "region"), "has": ("landmark",),
                   "is near": ("settlement",), "is older than": ("settlement",), "honors": ("person",),
                   "sells": ("goods", "region")}
RECIPE_VERBS = {"mix": ("ingredient",), "add": ("ingredient", "tool"), "put": ("ingredient", "tool"),
                "cut": ("ingredient",), "boil": ("ingredient", "duration"), "pour": ("ingredient", "tool"),
                "wash": ("ingredient",), "heat": ("tool",), "stir": ("ingredient",), "fry": ("ingredient", "tool"),
                "chop": ("ingredient",), "soak": ("ingredient", "duration"), "bake": ("ingredient", "duration"),
                "grind": ("ingredient",), "season": ("ingredient",), "cool": ("tool",)}
STEP_OPENERS = ("then", "next", "after that")


def write_document(world, chooser, topic: int | None = None) -> tuple[str, list[dict]]:
    """Run one document through the chooser (as a document of ``topic``); returns its type and records."""
    world = world.topic_view(topic)
    weights = {t: w for t, w in world.cfg.type_weights().items() if w > 0}
    total = sum(weights.values())
    menu = Menu()
    for doc_type, w in weights.items():
        menu.add(MARK + OPENINGS[doc_type], math.log(w / total), doc_type)
    doc_type = chooser.pick(menu)
    d = Discourse(world, chooser)
    PROCESSES[doc_type](d)
    return doc_type, d.records


def _go_on(d: Discourse, allowed: bool, p_end: float, go_on: str, stop: str) -> bool:
    """Pick between continuing (surface ``go_on``) and stopping (``stop``); stop is forced when not allowed."""
    if not allowed:
        d.ch.emit(stop)
        return False
    return d.ch.choose([go_on, stop], [math.log1p(-p_end), math.log(p_end)]) == 0


def _full_stop(d: Discourse, rec: dict, adverbs: str) -> dict:
    """End a clause: an optional adverb (a unit of its own) and the full stop."""
    menu = Menu()
    menu.add(".", math.log1p(-d.cfg.adverb_prob), None)
    menu.extend(d.word_menu(adverbs, NEXT, "{}."), math.log(d.cfg.adverb_prob))
    adverb = d.ch.pick(menu)
    if adverb:
        rec["adv"] = adverb
    return d.add(rec)


def _uniform(d: Discourse, options: list[str], lead) -> str:
    def build():
        return Menu([surface(lead, o) for o in options], [-math.log(len(options))] * len(options), options)
    return d.ch.pick(d.memo(("uniform", tuple(options), lead), build))


# -- story
def story(d: Discourse) -> None:
    hero = d.refer([], NEXT, "subj", new=[(1.0, PERSON)])
    d.ch.emit(f"{MARK} lived")
    home = d.refer([], NEXT, marker="in", new=[(1.0, SETTLEMENT)])
    d.ch.emit(".")
    d.add({"sep": "", "pre": "once upon a time", "subj": hero, "pred": "lived", "args": [home]})
    d.location[hero["id"]] = home["id"]
    n, ending = 1, f"{MARK}\n\nIn the end,"
    while _go_on(d, n < d.cfg.max_sentences, d.cfg.story_end_prob, f"{MARK} ", ending):
        story_sentence(d)
        n += 1
    here = d.location[hero["id"]]
    d.say({"sep": "\n\n", "pre": "in the end", "subj": {"id": hero["id"], "form": "name"}, "pred": "was",
           "args": [d.plain({"id": here})]}, emitted=ending)
    d.ch.emit(END)


def story_candidates(d: Discourse, kind: str, subj: str):
    """(existing candidates, intros of new ones) for one argument of a story verb."""
    if kind == "place":
        places = [p for p in d.of_kind("place") if p != d.location[subj]]
        return places, [(0.3, SETTLEMENT), (0.7, PLACE)]
    if kind == "other":
        return [p for p in d.of_kind("person") if p != subj], []
    if kind in ("person", "present"):
        here = [p for p in d.of_kind("person") if p != subj and d.location.get(p) == d.location[subj]]
        return here, [(1.0, PERSON)] if kind == "person" else []
    if kind == "new_thing":
        return [], [(1.0, THING)]
    if kind == "thing":
        return d.of_kind("thing"), [(1.0, THING)]
    return [t for t in d.of_kind("thing") if d.holder.get(t) == subj], []  # held


def story_sentence(d: Discourse) -> None:
    persons = d.of_kind("person")
    openers = d.word_menu("openers", FIRST, "{},", tag=("opener",))

    def subjects(lead):
        return d.ref_menu(persons, lead, "subj", new=[(1.0, PERSON)], new_prob=d.cfg.new_subject_prob)
    p = d.cfg.opener_prob
    value = d.ch.pick(Menu.mix([(p, openers), (1 - p, subjects(FIRST))]))
    rec = {"sep": " "}
    if value[0] == "opener":
        rec["pre"] = value[1]
        value = d.ch.pick(subjects(NEXT))
    subj = rec["subj"] = d.resolve(value)
    s = subj["id"]
    d.location.setdefault(s, d.location[persons[0]])  # a newcomer appears where the hero is

    # no verb of the story introduces what another of its arguments could mention, so the
    # candidates of every kind can be found once, before the verb is chosen
    candidates = {k: story_candidates(d, k, s) for k in STORY_KINDS}
    open_kinds = {k for k, c in candidates.items() if d.can_refer(*c)} | {"emotion"}
    verb = rec["pred"] = _uniform(d, [v for v in d.world.story_verbs if open_kinds.issuperset(STORY_VERBS[v][0])],
                                  NEXT)
    args = rec["args"] = []
    for kind, marker in zip(STORY_VERBS[verb][0], FRAMES[verb]):
        if kind == "emotion":
            args.append({"words": [d.ch.pick(d.word_menu("emotions", NEXT))]})
        else:
            old, new = candidates[kind]
            args.append(d.refer(old, NEXT, marker=marker, new=new))
    _full_stop(d, rec, "adverbs")
    effect = STORY_VERBS[verb][1]
    if effect == "move":
        d.location[s] = args[-1]["id"]
    elif effect == "meet":
        d.location[args[0]["id"]] = d.location[s]
    elif effect == "take":
        d.holder[args[0]["id"]] = s
    elif effect == "give":
        d.holder[args[0]["id"]] = args[1]["id"]
    elif effect == "drop":
        d.holder[args[0]["id"]] = None


# -- encyclopedia entry
def entry(d: Discourse) -> None:
    topic = d.refer([], NEXT, new=[(1.0, SETTLEMENT)])
    d.ch.emit(".")
    d.add({"sep": "", "pred": "this entry is about", "args": [topic]})
    t, facts, remaining = topic["id"], [], list(ENTRY_RELATIONS)
    d.ch.emit(f"{MARK} ")
    questions = f"{MARK}\n\nQuestions."
    while True:
        facts.append(entry_fact(d, t, remaining))
        n = len(facts) + 1
        more = bool(_open_relations(d, remaining)) and n < d.cfg.max_sentences
        if not _go_on(d, more, d.cfg.fact_end_prob, f"{MARK} ", questions):
            break
    d.say({"sep": "\n\n", "pred": "questions"}, emitted=questions)
    asked: set[tuple[int, int]] = set()
    while True:  # the first question is always asked
        options = [(k, i) for k, f in enumerate(facts) for i in range(len(f["args"])) if (k, i) not in asked]
        p_end = 0.0 if not asked else (d.cfg.question_end_prob if options and n < d.cfg.max_sentences else 1.0)
        menu = Menu()
        for k, i in options if p_end < 1 else ():
            q = _about(d, facts[k], i, "question", "\n")
            menu.add(d.R.record(q, d.ents), math.log((1 - p_end) / len(options)), (k, i, q))
        if p_end:
            menu.add(END, math.log(p_end), None)
        value = d.ch.pick(menu)
        if value is None:
            return
        k, i, q = value
        asked.add((k, i))
        d.add(q)
        d.say(_about(d, facts[k], i, "answer", " "))
        n += 2


def _about(d: Discourse, fact: dict, focus: int, mood: str, sep: str) -> dict:
    """A question about one argument of a fact, or its answer (the argument's phrase repeated)."""
    args = [d.plain(a) if j != focus else ({"id": a["id"], "form": "repeat"} if "id" in a else a)
            for j, a in enumerate(fact["args"])]
    return {"sep": sep, "subj": d.plain(fact["subj"]), "pred": fact["pred"], "args": args, "mood": mood, "focus": focus}


def entry_candidates(d: Discourse, kind: str):
    """(existing candidates, intros of new ones) for one argument of an entry relation."""
    if kind == "region":
        return d.of_kind("place", "proper"), [(1.0, REGION)]
    return [], [(1.0, {"water": WATER, "person": PERSON, "landmark": LANDMARK, "settlement": SETTLEMENT}[kind])]


def _open_relations(d: Discourse, remaining: list[str]) -> list[str]:
    return [r for r in remaining
            if all(k == "goods" or d.can_refer(*entry_candidates(d, k)) for k in ENTRY_RELATIONS[r])]


def entry_fact(d: Discourse, topic: str, remaining: list[str]) -> dict:
    menu, relations = Menu(), _open_relations(d, remaining)
    for relation in relations:
        for form, text, lp in d.forms(topic, "subj"):
            menu.add(f"{surface(FIRST, text)}{MARK} {relation}", lp - math.log(len(relations)), (relation, form))
    relation, form = d.ch.pick(menu)
    remaining.remove(relation)
    rec = {"sep": " ", "subj": {"id": topic, "form": form}, "pred": relation, "args": []}
    for kind, marker in zip(ENTRY_RELATIONS[relation], FRAMES[relation]):
        if kind == "goods":
            template = f"{marker} {{}}" if marker else "{}"
            rec["args"].append({"words": [d.ch.pick(d.word_menu("goods", NEXT, template))]})
        else:
            old, new = entry_candidates(d, kind)
            rec["args"].append(d.refer(old, NEXT, marker=marker, new=new))
    d.ch.emit(".")
    return d.add(rec)


# -- recipe
def recipe(d: Discourse) -> None:
    dish = d.refer([], NEXT, new=[(1.0, DISH)])
    d.ch.emit(".")
    d.add({"sep": "", "pred": "how to make", "args": [dish]})
    d.ch.emit(f"{MARK} You{MARK} need")
    items = [d.refer([], NEXT, new=[(1.0, INGREDIENT)])]
    more = False  # after a comma the list must go on to an "and" item
    while True:
        left, p = len(d.unused("ingredients")), d.cfg.list_end_prob
        weights = {".": 0.0 if more else p, f"{MARK} and": (p if more else (1 - p) * p) * (left >= 1),
                   ",": ((1 - p) if more else (1 - p) ** 2) * (left >= 2)}
        total, menu = sum(weights.values()), Menu()
        for sep, w in weights.items():
            if w > 0:
                menu.add(sep, math.log(w / total), sep)
        sep = d.ch.pick(menu)
        if sep == ".":
            break
        items.append(d.refer([], CONT if sep != "," else NEXT, new=[(1.0, INGREDIENT)]))
        if sep != ",":
            d.ch.emit(".")
            break
        more = True
    d.add({"sep": " ", "subj": {"form": "you"}, "pred": "need", "args": [{"items": items}]})
    listed, cooked = [i["id"] for i in items], set()
    d.ch.emit(f"{MARK} First,")
    recipe_step(d, "first", listed, cooked)
    n, finally_ = 3, f"{MARK} Finally,"
    while n < d.cfg.max_sentences:
        menu = Menu()
        for o in STEP_OPENERS:
            menu.add(f"{MARK} {cap(o)},", math.log((1 - d.cfg.step_end_prob) / len(STEP_OPENERS)), o)
        menu.add(finally_, math.log(d.cfg.step_end_prob), None)
        pre = d.ch.pick(menu)
        if pre is None:
            break
        recipe_step(d, pre, listed, cooked)
        n += 1
    else:
        d.ch.emit(finally_)
    d.say({"sep": " ", "pre": "finally", "pred": "serve", "args": [{"id": dish["id"], "form": "desc"}]},
          emitted=finally_)
    d.ch.emit(END)


def recipe_step(d: Discourse, pre: str, listed: list[str], cooked: set) -> None:
    verb = _uniform(d, d.world.recipe_verbs, NEXT)
    rec = {"sep": " ", "pre": pre, "pred": verb, "args": []}
    for kind, marker in zip(RECIPE_VERBS[verb], FRAMES[verb]):
        if kind == "ingredient":
            w = d.cfg.unused_ingredient_weight
            ref = d.refer([(i, 1.0 if i in cooked else w) for i in listed], NEXT, marker=marker)
            cooked.add(ref["id"])
        elif kind == "tool":
            ref = d.refer(d.of_kind("thing", "def"), NEXT, marker=marker, new=[(1.0, TOOL)])
        else:
            ref = {"words": list(d.ch.pick(d.word_menu("durations", NEXT, f"{marker} {{}}")))}
        rec["args"].append(ref)
    _full_stop(d, rec, "adverbs")


# -- dialogue
def dialogue(d: Discourse) -> None:
    a = d.refer([], NEXT, "subj", new=[(1.0, PERSON)])
    d.ch.emit(f"{MARK} meets")
    b = d.refer([], NEXT, new=[(1.0, PERSON)])
    d.ch.emit(".")
    d.add({"sep": "", "pre": "in this talk", "subj": a, "pred": "meets", "args": [b]})
    speaker, other = a["id"], b["id"]
    for s, o in ((speaker, other), (other, speaker)):
        d.say({"sep": "\n", "speaker": s, "pred": "hello", "args": [{"id": o, "form": "name"}]})
    n, question = 3, None
    while True:
        if question:
            d.say(dict(question, sep="\n", speaker=speaker, mood="answer"))
            question = None
        else:
            rec = dialogue_turn(d, speaker, other, 1.0 if n >= d.cfg.max_sentences else d.cfg.turn_end_prob)
            if rec["pred"] == "goodbye":
                d.say({"sep": "\n", "speaker": other, "pred": "goodbye", "args": [{"id": speaker, "form": "name"}]})
                d.ch.emit(END)
                return
            question = rec if rec.get("mood") == "question" else None
        speaker, other, n = other, speaker, n + 1


def dialogue_turn(d: Discourse, speaker: str, other: str, p_end: float) -> dict:
    """One turn, returned: goodbye, a statement, or a question (to be answered in the next turn)."""
    label = f"{MARK}\n{d.ents[speaker]['name']}:"
    goodbye = {"sep": "\n", "speaker": speaker, "pred": "goodbye", "args": [{"id": other, "form": "name"}]}
    menu = Menu()
    menu.add(d.R.record(goodbye, d.ents), math.log(p_end), ("goodbye",))
    if p_end < 1:
        askable = [t for t in d.of_kind("thing") if t in d.location]
        p_ask = d.cfg.dialogue_question_prob if askable else 0.0
        verbs = d.world.dialogue_verbs
        for verb in verbs:
            lp = math.log((1 - p_end) * (1 - p_ask) / len(verbs))
            menu.add(f"{label}{surface(TURN, 'I')}{MARK} {verb}", lp, ("say", verb))
        if askable:
            subjects = d.ref_menu(askable, TURN, "subj")
            asks = Menu([f"{label}{s}{MARK} is{MARK} where?" for s in subjects.surfaces], subjects.logps,
                        [("ask", v) for v in subjects.values])
            menu.extend(asks, math.log((1 - p_end) * p_ask))
    value = d.ch.pick(menu)
    if value[0] == "goodbye":
        return d.add(goodbye)
    if value[0] == "ask":
        subj = d.resolve(value[1])
        place = {"id": d.location[subj["id"]], "form": "repeat"}
        return d.add({"sep": "\n", "speaker": speaker, "subj": subj, "pred": "is", "args": [place],
                      "mood": "question", "focus": 0})
    thing = d.refer(d.of_kind("thing"), NEXT, new=[(1.0, THING)])
    place = d.refer(d.of_kind("place"), NEXT, marker="in", new=[(1.0, PLACE)])
    d.location[thing["id"]] = place["id"]
    rec = {"sep": "\n", "speaker": speaker, "subj": {"form": "I"}, "pred": value[1], "args": [thing, place]}
    return _full_stop(d, rec, "times")


PROCESSES = {"story": story, "entry": entry, "recipe": recipe, "dialogue": dialogue}
