"""The English word lists the world draws its lexicon from (data only).

Each list is one lexical category; the world takes a seeded permutation of it and keeps the first
``n_<category>`` words. Within a category no word is a prefix-word of another (``the mill`` /
``the milling``), and the categories that can meet in one choice are disjoint, which the chooser
checks at run time anyway. Verb lists are ordered, not permuted: their first entries never lack
arguments (``slept``, ``mix``), so even the smallest verb set can always continue a document.
"""

PROFESSIONS = """baker weaver farmer fisher smith potter miller hunter tailor sailor shepherd carpenter mason
healer merchant soldier painter singer dancer teacher builder cook gardener brewer butcher cobbler jeweler
scribe priest guard herder trader ranger knight poet drummer tanner barber ferryman beekeeper woodcutter
stonecutter innkeeper messenger clockmaker ropemaker bookbinder archer juggler""".split()
PERSON_ADJECTIVES = """old young kind brave clever poor rich quiet tall proud gentle lazy busy wise shy
cheerful stern merry curious famous careful humble loud friendly""".split()
THINGS = """basket lamp rope knife coat hat mirror key ring box bell book map drum flute blanket boot candle
chair clock comb feather flag glove hammer kettle ladder letter needle net pillow saddle scarf shield shovel
stick sword table torch toy umbrella wagon wheel whistle belt bucket brush cart chest cloak crown dagger fan
fork goblet harp helmet horn jug lantern locket mask medal necklace oar purse quilt rake ribbon sack""".split()
THING_ADJECTIVES = """red blue green yellow black white brown golden silver wooden heavy big little shiny broken
dusty tiny huge soft sharp round long painted woolen leather iron copper""".split()
PLACES = """market mill forest harbor well kitchen garden temple castle farm bakery tavern meadow hill beach
cave library school square orchard field stable barn inn shop valley camp dock cellar attic""".split()
SETTLEMENTS = "village town city port hamlet fortress colony".split()
WATERS = "river lake stream bay pond spring".split()
PLACE_ADJECTIVES = """small large ancient bustling northern southern eastern western grand hidden windy sunny
rocky peaceful crowded distant""".split()
LANDMARKS = """tower gate bridge fountain statue wall lighthouse arena palace aqueduct monastery obelisk
archway windmill observatory""".split()
EMOTIONS = """happy sad tired angry calm afraid lonely hungry excited worried sleepy surprised grateful
bored hopeful""".split()
ADVERBS = """quickly slowly quietly happily sadly carefully gently proudly again early twice together alone
bravely loudly softly eagerly calmly""".split()
TIMES = ["yesterday", "today", "earlier", "this morning", "last night", "an hour ago", "at dawn", "last week"]
OPENERS = ["then", "later", "one day", "after that", "soon", "that evening", "the next day", "at noon"]
ROOTS = """salt fish iron wood honey stone root berry wool silk corn milk oil fire moon sun sea bark leaf
seed nut rose mint plum apple pearl amber tin clay glass reed moss fern thorn pine oak ash elm cedar lime
pepper ginger cream bean rice wheat barley sugar ink gold frost rain cloud star sand shell bone""".split()
INGREDIENTS = """flour salt milk butter honey rice beans oil sugar water cream cheese onions garlic pepper
carrots potatoes apples nuts oats barley lentils mushrooms herbs vinegar yeast eggs tomatoes cabbage peas
plums berries ginger mint lemons""".split()
UNITS = [("cup", "cups"), ("spoon", "spoons"), ("handful", "handfuls"), ("pinch", "pinches"),
         ("pound", "pounds"), ("measure", "measures")]
NUMBERS = "one two three four five six seven eight nine ten".split()
TOOLS = "bowl pot pan jar plate oven pitcher basin tray skillet".split()
DISH_KINDS = "bread soup stew cake pie porridge salad tart pudding dumplings pancakes broth".split()
DURATIONS = [("five", "minutes"), ("ten", "minutes"), ("twenty", "minutes"), ("an", "hour"),
             ("two", "hours"), ("a", "while"), ("three", "minutes"), ("half", "an", "hour")]
STORY_VERBS = ["slept", "walked", "felt", "met", "found", "gave", "saw", "lost", "carried", "made", "greeted",
               "showed", "ran", "bought", "waited", "rode", "laughed", "visited", "sold", "thanked", "helped",
               "fixed", "painted", "dropped", "danced", "cried", "called"]
RECIPE_VERBS = ["mix", "add", "put", "cut", "boil", "pour", "wash", "heat", "stir", "fry", "chop", "soak",
                "bake", "grind", "season", "cool"]
DIALOGUE_VERBS = ["put", "left", "hid", "kept", "stored", "placed", "buried", "hung"]

SIZES = {
    "n_professions": len(PROFESSIONS), "n_person_adjectives": len(PERSON_ADJECTIVES),
    "n_things": len(THINGS), "n_thing_adjectives": len(THING_ADJECTIVES), "n_places": len(PLACES),
    "n_settlements": len(SETTLEMENTS), "n_waters": len(WATERS), "n_place_adjectives": len(PLACE_ADJECTIVES),
    "n_landmarks": len(LANDMARKS), "n_emotions": len(EMOTIONS), "n_adverbs": len(ADVERBS),
    "n_times": len(TIMES), "n_openers": len(OPENERS),
    "n_goods": len(ROOTS) * (len(ROOTS) - 1), "n_ingredients": len(INGREDIENTS), "n_units": len(UNITS),
    "n_numbers": len(NUMBERS), "n_tools": len(TOOLS), "n_dish_kinds": len(DISH_KINDS),
    "n_durations": len(DURATIONS), "n_story_verbs": len(STORY_VERBS), "n_recipe_verbs": len(RECIPE_VERBS),
    "n_dialogue_verbs": len(DIALOGUE_VERBS),
    "n_consonants": 14, "n_vowels": 5,
}
CONSONANTS = "kmtsnrlpdgbvfz"
VOWELS = "aoeiu"
