# kvfleet's tokenizers and chat templates against independent oracles:
# Hugging Face `tokenizers` built from the GGUF vocabulary (read with the
# `gguf` package), `sentencepiece`, and jinja2 rendering the real template
# strings. tokenize_dump is the C++ side; the Python scripts generate the
# inputs (seeded) and compare.
add_executable(tokenize_dump tokenize_dump.cc)
target_link_libraries(tokenize_dump PRIVATE kvfleet_tokenizer kvfleet_gguf kvfleet_hf)

set(_tok_ref ${CMAKE_CURRENT_SOURCE_DIR})

# SmolLM2's own pre-tokenizer ("smollm": digits, then the GPT-2 regex).
add_test(NAME reference.tokenizer.smollm2
  COMMAND ${KVFLEET_PYTHON} ${_tok_ref}/tokenizer_reference.py
          --dump $<TARGET_FILE:tokenize_dump> --model ${KVFLEET_DEFAULT_MODEL}
          --pre smollm --count 1500 --seed 1)
# The Llama 3 split regex ("llama-bpe") over the same vocabulary.
add_test(NAME reference.tokenizer.llama_bpe
  COMMAND ${KVFLEET_PYTHON} ${_tok_ref}/tokenizer_reference.py
          --dump $<TARGET_FILE:tokenize_dump> --model ${KVFLEET_DEFAULT_MODEL}
          --pre llama-bpe --count 1500 --seed 2)
# The same regex with every merge applied ("dbrx": OLMo 2's tokenizer).
add_test(NAME reference.tokenizer.dbrx
  COMMAND ${KVFLEET_PYTHON} ${_tok_ref}/tokenizer_reference.py
          --dump $<TARGET_FILE:tokenize_dump> --model ${KVFLEET_DEFAULT_MODEL}
          --pre dbrx --count 500 --seed 3)
# Qwen2.5's split regex ("qwen2") over its own 151,936-token vocabulary.
add_test(NAME reference.tokenizer.qwen2
  COMMAND ${KVFLEET_PYTHON} ${_tok_ref}/tokenizer_reference.py
          --dump $<TARGET_FILE:tokenize_dump> --model ${KVFLEET_QWEN_MODEL}
          --pre qwen2 --count 1500 --seed 6)
# Gemma 3's 262,144 SentencePiece pieces (user-defined whitespace runs and
# HTML tags, byte fallback, no space prefix) against sentencepiece running a
# ModelProto built from the same GGUF.
add_test(NAME reference.tokenizer.gemma3
  COMMAND ${KVFLEET_PYTHON} ${_tok_ref}/tokenizer_spm_gguf_reference.py
          --dump $<TARGET_FILE:tokenize_dump> --model ${KVFLEET_GEMMA_MODEL} --count 1000 --seed 7)
# SentencePiece BPE: a tiny model trained here, written to a GGUF.
add_test(NAME reference.tokenizer.sentencepiece
  COMMAND ${KVFLEET_PYTHON} ${_tok_ref}/tokenizer_spm_reference.py
          --dump $<TARGET_FILE:tokenize_dump> --count 1200 --seed 3)
add_test(NAME reference.tokenizer.sentencepiece_unk
  COMMAND ${KVFLEET_PYTHON} ${_tok_ref}/tokenizer_spm_reference.py
          --dump $<TARGET_FILE:tokenize_dump> --count 1200 --seed 5 --no-byte-fallback)
# Chat templates: SmolLM2's (from the GGUF) and Llama 3's, rendered by jinja2.
add_test(NAME reference.tokenizer.chat_template
  COMMAND ${KVFLEET_PYTHON} ${_tok_ref}/tokenizer_chat_reference.py
          --dump $<TARGET_FILE:tokenize_dump> --model ${KVFLEET_DEFAULT_MODEL} --seed 4)
set_tests_properties(reference.tokenizer.smollm2 reference.tokenizer.llama_bpe reference.tokenizer.dbrx reference.tokenizer.qwen2
  reference.tokenizer.gemma3
  reference.tokenizer.sentencepiece reference.tokenizer.sentencepiece_unk reference.tokenizer.chat_template
  PROPERTIES LABELS reference TIMEOUT 300 SKIP_RETURN_CODE 77)
