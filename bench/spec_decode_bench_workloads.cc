#include "bench/spec_decode_bench_workloads.h"

namespace kvfleet::bench {

std::vector<SpecWorkload> SpecWorkloads() {
  return {
      {"structured",
       {
           // JSON extraction from a given text.
           "Extract every person in the text below as a JSON list of objects with the keys \"name\", \"age\", "
           "\"city\" and \"job\". Answer with the JSON only.\n\nText: Alice Martin is 34 years old and lives in "
           "Paris, where she works as an architect. Bob Chen, 41, is a teacher in Boston. Carla Diaz is 29; she "
           "lives in Madrid and works as a nurse. David Okafor, aged 52, is a lawyer based in Lagos.",
           // Code completion.
           "Complete this Python class by adding the methods subtract, multiply and divide, written in the same "
           "style as add.\n\nclass Calculator:\n    def __init__(self):\n        self.history = []\n\n    def "
           "add(self, a, b):\n        result = a + b\n        self.history.append((\"add\", a, b, result))\n"
           "        return result\n",
           // Editing a given document.
           "Correct the spelling mistakes in the following paragraph and return the whole corrected paragraph.\n\n"
           "The comittee met on Tuesday to discus the new budjet. After a long debate, the members agreed to "
           "increse funding for the libary and to reduce spending on ofice supplies. The chairman thanked "
           "everyone for there hard work and closed the meeting at five oclock.",
           // Reformatting a given list.
           "Turn this list into a Markdown table with the columns Product, Price and Stock.\n\n- Laptop, 999 "
           "dollars, 12 in stock\n- Mouse, 25 dollars, 140 in stock\n- Keyboard, 45 dollars, 87 in stock\n- "
           "Monitor, 199 dollars, 33 in stock\n- Webcam, 60 dollars, 54 in stock",
       }},
      {"code",
       {
           // Adding type hints to a given function: the answer repeats it.
           "Add Python type hints to this function and return the whole function.\n\n"
           "def merge_intervals(intervals):\n    intervals = sorted(intervals, key=lambda pair: pair[0])\n"
           "    merged = []\n    for start, end in intervals:\n        if merged and start <= merged[-1][1]:\n"
           "            merged[-1][1] = max(merged[-1][1], end)\n        else:\n            merged.append([start, "
           "end])\n"
           "    return merged\n",
           // Fixing a bug in a given file and returning it whole.
           "This function should return the n-th Fibonacci number but it has a bug. Fix it and return the whole "
           "corrected code.\n\ndef fibonacci(n):\n    if n < 0:\n        raise ValueError(\"n must be "
           "non-negative\")\n    a, b = 0, 1\n    for _ in range(n):\n        a, b = b, a + a\n    return a\n\n\n"
           "def fibonacci_list(count):\n    return [fibonacci(i) for i in range(count)]\n",
           // Unit tests for a given function, which quote its name and arguments.
           "Write pytest unit tests for this function.\n\ndef normalize_email(address):\n    address = "
           "address.strip().lower()\n    local, _, domain = address.partition(\"@\")\n    if not local or not "
           "domain:\n        raise ValueError(f\"not an email address: {address}\")\n    local = "
           "local.split(\"+\")[0].replace(\".\", \"\")\n    return f\"{local}@{domain}\"\n",
           // Translating a given function to another language.
           "Translate this Python function to JavaScript.\n\ndef word_counts(text):\n    counts = {}\n    for "
           "word in text.lower().split():\n        word = word.strip(\".,!?\")\n        if word:\n            "
           "counts[word] = counts.get(word, 0) + 1\n    return sorted(counts.items(), key=lambda item: -item[1])\n",
       }},
      {"chat",
       {
           "Write a short poem about the ocean at night.",
           "Tell me a story about a dragon who learns to cook.",
           "What are some good tips for staying productive when working from home?",
           "Describe your ideal vacation and explain why you would enjoy it.",
       }},
  };
}

}  // namespace kvfleet::bench
