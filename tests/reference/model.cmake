# kvfleet's model executor against the independent numpy reference
# (llama_numpy.py: the gguf package's reader and dequantization, no kvfleet
# code). Needs the project's virtualenv (scripts/setup.sh) and, for the
# SmolLM2 test, the default model (scripts/fetch_model.sh).
# Logits and 32-token greedy continuations on 21 prompts of the real model
# (skipped, exit 77, when the model has not been fetched).
# Every real-model and checkpoint test in this file takes one ctest slot:
# the numpy reference (one BLAS thread) is most of each run, and kvfleet's
# runs (one thread) overlap only its first prompts, 1.2 cores on average,
# measured. COST starts these long tests first, beside the short ones,
# rather than last and one after another (a fresh clone has no ctest timing
# history to order by).
add_test(NAME reference.model.smollm2
  COMMAND ${KVFLEET_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/model_reference.py
          --kvfleet $<TARGET_FILE:kvfleet> --model ${KVFLEET_DEFAULT_MODEL})
set_tests_properties(reference.model.smollm2 PROPERTIES
  LABELS reference COST 60 TIMEOUT 600 SKIP_RETURN_CODE 77)

# The real K-quant models (scripts/fetch_model.sh), five prompts each, 16
# greedy tokens: Qwen2.5-Coder-0.5B-Instruct (qwen2: Q/K/V biases, Q5_0,
# Q4_K, Q6_K, Q8_0) and Gemma 3 270M (gemma3: its norms, tanh-GELU, sliding
# windows; a 600-token prompt crosses its 512-token window).
add_test(NAME reference.model.qwen2_5_coder_0_5b
  COMMAND ${KVFLEET_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/model_reference.py
          --kvfleet $<TARGET_FILE:kvfleet> --model ${KVFLEET_QWEN_MODEL} --few --gen-tokens 16)
add_test(NAME reference.model.gemma3_270m
  COMMAND ${KVFLEET_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/model_reference.py
          --kvfleet $<TARGET_FILE:kvfleet> --model ${KVFLEET_GEMMA_MODEL} --few --gen-tokens 16 --long 600)
set_tests_properties(reference.model.qwen2_5_coder_0_5b reference.model.gemma3_270m PROPERTIES
  LABELS reference COST 60 TIMEOUT 900 SKIP_RETURN_CODE 77)

# Every block of every tensor of the real files, dequantized by kvfleet and
# by the gguf package's numpy code: identical bits (SHA-256 of each tensor).
add_executable(tensor_dump tensor_dump.cc)
target_link_libraries(tensor_dump PRIVATE kvfleet_gguf kvfleet_kernels_cpu OpenSSL::Crypto)
foreach(real qwen2_5_coder_0_5b:${KVFLEET_QWEN_MODEL} gemma3_270m:${KVFLEET_GEMMA_MODEL})
  string(REPLACE ":" ";" parts ${real})
  list(GET parts 0 name)
  list(GET parts 1 path)
  add_test(NAME reference.dequant.${name}
    COMMAND ${KVFLEET_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/dequant_reference.py
            --dump $<TARGET_FILE:tensor_dump> --model ${path})
  set_tests_properties(reference.dequant.${name} PROPERTIES LABELS reference TIMEOUT 600 SKIP_RETURN_CODE 77)
endforeach()
# Random blocks of every quantized type (those no fetched file holds among
# them), with finite scales: identical bits to the numpy dequantization.
add_test(NAME reference.dequant.random_blocks
  COMMAND ${KVFLEET_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/dequant_reference.py
          --dump $<TARGET_FILE:tensor_dump> --random-blocks --seed 5 --kvfleet $<TARGET_FILE:kvfleet>)
set_tests_properties(reference.dequant.random_blocks PROPERTIES LABELS reference TIMEOUT 120)

# Every architecture kvfleet registers (the list comes from `kvfleet
# tiny-model --list-architectures`, so a new one runs here, and fails until
# the numpy reference has its forward pass), and the variants worth a case
# (Llama 3's scaled RoPE), each on a tiny model of its shape: six layers,
# so Gemma 3 has one global layer among its windowed ones; prompts to 100
# tokens.
add_test(NAME reference.model.tiny_architectures
  COMMAND ${KVFLEET_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/model_reference.py
          --kvfleet $<TARGET_FILE:kvfleet> --tiny-dtype Q8_0 --tiny-arch all --tiny-layers 6 --seed 9)
set_tests_properties(reference.model.tiny_architectures PROPERTIES LABELS reference TIMEOUT 300)

# Every tensor type kvfleet reads (the list `kvfleet tiny-model --list-types`
# gives, from its type table), on a tiny random Llama it writes itself.
add_test(NAME reference.model.tiny_types
  COMMAND ${KVFLEET_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/model_reference.py
          --kvfleet $<TARGET_FILE:kvfleet> --tiny-dtype all --seed 7)
set_tests_properties(reference.model.tiny_types PROPERTIES LABELS reference TIMEOUT 600)

# The Hugging Face checkpoint path on real weights: Qwen2.5-Coder-0.5B
# exported as a two-shard bf16 checkpoint (kvfleet export-hf) against the
# GGUF it came from (logits, greedy continuations), its tokenizer.json read by
# kvfleet against Hugging Face `tokenizers`, and Gemma 3's vocabulary as
# tokenizer.json against `tokenizers` and sentencepiece.
add_test(NAME reference.checkpoint
  COMMAND ${KVFLEET_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/checkpoint_reference.py
          --kvfleet $<TARGET_FILE:kvfleet> --dump $<TARGET_FILE:tokenize_dump>
          --qwen ${KVFLEET_QWEN_MODEL} --gemma ${KVFLEET_GEMMA_MODEL} --gen-tokens 16)
set_tests_properties(reference.checkpoint PROPERTIES
  LABELS reference COST 40 TIMEOUT 900 SKIP_RETURN_CODE 77)

# Teacher-forced evaluation (kvfleet eval) against the float64 numpy
# reference: SmolLM2 on 1,024 tokens of docs/design.md in windows of 256;
# perplexity and the KL divergence of the f32 mode (tools/eval/), and the
# calibration record of every mode (kvfleet eval --calibrate).
add_test(NAME reference.eval.smollm2
  COMMAND ${KVFLEET_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/eval_reference.py
          --kvfleet $<TARGET_FILE:kvfleet> --model ${KVFLEET_DEFAULT_MODEL})
set_tests_properties(reference.eval.smollm2 PROPERTIES LABELS reference TIMEOUT 300)

# The same under a trained LoRA adapter on all seven projections
# (models/lora/smollm2-result-arrow), on 512 tokens: float64 with the
# adapter merged into the weights (lora_numpy.py) against kvfleet eval
# --lora, and every mode judged under it by the gate (its record names the
# adapter).
add_test(NAME reference.eval.smollm2_lora
  COMMAND ${KVFLEET_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/eval_reference.py
          --kvfleet $<TARGET_FILE:kvfleet> --model ${KVFLEET_DEFAULT_MODEL} --tokens 512
          --lora ${PROJECT_SOURCE_DIR}/models/lora/smollm2-result-arrow)
set_tests_properties(reference.eval.smollm2_lora PROPERTIES LABELS reference TIMEOUT 300)
