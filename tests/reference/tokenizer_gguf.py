"""Reads a GGUF file's tokenizer metadata with the `gguf` package (no kvfleet code)."""

import gguf


def _value(field):
    t = field.types[0]
    if t == gguf.GGUFValueType.ARRAY:
        if field.types[1] == gguf.GGUFValueType.STRING:
            return [bytes(field.parts[i]).decode("utf-8") for i in field.data]
        return [field.parts[i].tolist()[0] for i in field.data]
    if t == gguf.GGUFValueType.STRING:
        return bytes(field.parts[field.data[0]]).decode("utf-8")
    return field.parts[field.data[0]].tolist()[0]


def read_tokenizer_metadata(path):
    """Returns {key suffix: value} for tokenizer.ggml.* plus 'chat_template'."""
    reader = gguf.GGUFReader(path)
    meta = {}
    for key, field in reader.fields.items():
        if key.startswith("tokenizer.ggml."):
            meta[key[len("tokenizer.ggml."):]] = _value(field)
        elif key == "tokenizer.chat_template":
            meta["chat_template"] = _value(field)
    return meta
