#!/usr/bin/env python3
"""Writes the chat prompts draft heads train on (prompts.txt) and the
held-out ones their acceptance is measured on (heldout.txt): open chat
requests built from task templates and topics, deterministic, one per line.
The held-out set uses topics the training set never sees, and neither
contains spec_decode_bench's chat prompts.

  python3 tools/heads/make_prompts.py --out tools/heads
"""
import argparse
import random
from pathlib import Path

TASKS = [
    "Write a short poem about {}.",
    "Explain {} in simple terms.",
    "Give me five tips about {}.",
    "Describe {} to someone who has never seen it.",
    "Tell me a short story about {}.",
    "What are the pros and cons of {}?",
    "Write a friendly email to a colleague about {}.",
    "Summarize the history of {} in a few sentences.",
    "Why do people enjoy {}?",
    "Write a product description for something related to {}.",
    "List some common mistakes people make with {}.",
    "How would you teach a child about {}?",
]

TOPICS = [
    "gardening", "the moon", "a rainy afternoon", "baking bread", "learning a new language", "city buses",
    "mountain hiking", "a lost cat", "public libraries", "coffee", "the first day of school", "electric cars",
    "birthday parties", "rivers", "playing chess", "a lighthouse", "winter mornings", "recycling", "a busy market",
    "friendship", "trains", "the desert", "painting with watercolors", "saving money", "a robot who wants to dance",
    "volcanoes", "bicycles", "a small bakery", "the internet", "cooking pasta", "a thunderstorm", "honeybees",
    "running a marathon", "museums", "autumn leaves", "a clockmaker", "board games", "owls", "a snowy village",
    "photography", "tea ceremonies", "space travel", "a haunted house", "farming", "music lessons", "penguins",
    "knitting", "a detective in Paris", "sunflowers", "time management", "bridges", "a family dinner", "forests",
]

HELDOUT_TOPICS = [
    "a garden snail", "the northern lights", "street food", "origami", "a jazz club", "kites", "glaciers",
    "a village festival", "bird watching", "a pirate ship", "lemonade stands", "wind turbines",
]


def prompts(topics: list[str], count: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    pairs = [(t, topic) for t in TASKS for topic in topics]
    rng.shuffle(pairs)
    return [task.format(topic) for task, topic in pairs[:count]]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=Path(__file__).parent)
    p.add_argument("--train", type=int, default=400)
    p.add_argument("--heldout", type=int, default=40)
    a = p.parse_args()
    (a.out / "prompts.txt").write_text("\n".join(prompts(TOPICS, a.train, 1)) + "\n")
    (a.out / "heldout.txt").write_text("\n".join(prompts(HELDOUT_TOPICS, a.heldout, 2)) + "\n")


if __name__ == "__main__":
    main()
