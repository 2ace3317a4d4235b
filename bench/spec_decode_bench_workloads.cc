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
