# The suite's table: every test's labels and its timeout in seconds.
# tests/CMakeLists.txt applies it to each test it adds, and a test missing
# from it (or an entry whose test no longer exists) stops the configure, so
# no test runs without a class and a bound on its time.
#
# Labels (ctest -L LABEL runs a class; scripts/test.sh, test_sanitize.sh
# and gpu_check.sh pick their tests by label):
#   unit      host code alone, or one small device check: seconds
#   ops       the shaders' ops against the C reference
#   model     the whole model, generation, files of a model
#   train     `vktrain train` runs end to end
#   parity    against an independent implementation (PyTorch,
#             transformers, PEFT, tokenizers, a Python reader)
#   dist      several processes under mpirun
#   repro     precision: reproducible
#   slow      over a minute on a 2-core machine
#   sanitize  the C tests test_sanitize.sh also runs under ASan + UBSan
#   device    the test programs gpu_check.sh runs on a GPU
#   strict    the subset scripts/test.sh runs again under its stricter
#             passes (synchronization validation, forced staging, NaN-filled
#             buffers)
#   gpu_assisted  the subset of its GPU-assisted validation pass (some 50
#             times slower on lavapipe)
#
# Timeouts are three to five times the time seen on a 2-core machine (at
# least 60 s), more for the tests the stricter passes run again under the
# validation layer's slower modes: a test that stalls fails within its
# bound instead of passing late. The figures scripts/test.sh prints at the end (the ten slowest
# tests) are where to look when one is changed.
#
# name                         labels (comma-separated)          timeout
set(VKTRAIN_SUITE
  test_bnb_folders             model,parity                      300
  test_chat_template           parity                            120
  test_cli                     unit                              60
  test_config                  unit,sanitize                     60
  test_config_cli              unit                              60
  test_coopmat                 ops                               120
  test_coopmat_sid             ops,parity,slow                   400
  test_data_order              unit,sanitize                     60
  test_data_sft                unit,sanitize                     60
  test_data_text               unit,sanitize                     60
  test_data_tokens             unit,sanitize                     60
  test_descriptors             ops,strict,gpu_assisted           300
  test_dist                    dist,train                        300
  test_errors                  train                             120
  test_flash_attention         ops,device,slow                   600
  test_flash_torch             ops,parity                        120
  test_generate                model,sanitize,device,strict      300
  test_generate_cli            model                             120
  test_gpu_profile             unit,sanitize                     60
  test_hf_families             model,parity                      300
  test_hf_transformers         model,parity                      180
  test_hfconfig                unit,sanitize                     60
  test_large                   ops,device                        120
  test_lavapipe2               train,repro                       400
  test_limits                  train                             180
  test_limits_ops              ops,sanitize                      120
  test_lora                    model,parity,dist                 180
  test_lora_dropout            ops,sanitize                      60
  test_lora_model              model,sanitize                    240
  test_memory                  unit,sanitize,strict              120
  test_memory_plan             train                             60
  test_model                   model,sanitize,device,strict      300
  test_model_io                model,sanitize                    60
  test_model_memory            model                             120
  test_nonfinite               train,dist                        120
  test_ops                     ops,device,slow                   600
  test_ops_nn                  ops,sanitize,device,strict        180
  test_optim                   ops,sanitize,strict,gpu_assisted  300
  test_optim_torch             ops,parity                        60
  test_parity_torch            model,parity                      120
  test_profile                 train                             120
  test_ref_forward             unit,sanitize                     60
  test_ref_gradcheck           unit,sanitize                     60
  test_repro_adamw             repro,ops                         60
  test_repro_attention         repro,ops,device,strict,slow      600
  test_repro_config            repro,unit                        60
  test_repro_host              repro,unit                        60
  test_repro_lavapipe          repro,ops,slow                    900
  test_repro_lint              repro,unit                        60
  test_repro_math              repro,ops                         60
  test_repro_matmul            repro,ops,device                  180
  test_repro_ops               repro,ops,device,strict           300
  test_repro_probe             repro,unit,device                 60
  test_repro_startup           repro,dist                        120
  test_repro_sum               repro,ops                         60
  test_repro_train             repro,dist,train,slow             600
  test_run_errors              train,dist                        60
  test_safetensors             unit,sanitize                     60
  test_safetensors_py          unit,parity                       60
  test_signals                 train,dist                        120
  test_tokenizer               unit,sanitize                     60
  test_tokenizer_hf            unit,parity                       120
  test_tokenizer_hf_unit       unit,sanitize                     60
  test_train                   train                             120
  test_train_parity_torch      train,parity                      120
  test_tutorial                train,parity,dist                 120
  test_validation              unit                              60
  test_validation_passes       unit                              60
  test_zero                    dist,train                        120
  test_fuzz_hfconfig           unit                              60
  test_fuzz_recipe             unit                              60
  test_fuzz_safetensors        unit                              60
  test_fuzz_sft_jsonl          unit                              60
  test_fuzz_tokenizer          unit                              60
  test_fuzz_tokens             unit                              60
)

# Applies the table to the tests of the calling directory: tests/ calls it
# for every entry but test_fuzz_*, tests/fuzz/ for those (ctest's
# properties are set where a test is added). Fatal for a test without an
# entry and for an entry without its test.
function(vktrain_apply_suite fuzz)
  set(listed "")
  set(rest ${VKTRAIN_SUITE})
  while(rest)
    list(POP_FRONT rest name labels timeout)
    string(REGEX MATCH "^test_fuzz_" is_fuzz ${name})
    if((is_fuzz AND NOT fuzz) OR (fuzz AND NOT is_fuzz))
      continue()
    endif()
    if(NOT TEST ${name})
      message(FATAL_ERROR "tests/suite.cmake lists ${name}, which is no test")
    endif()
    string(REPLACE "," ";" labels "${labels}")
    set_tests_properties(${name} PROPERTIES LABELS "${labels}" TIMEOUT ${timeout})
    list(APPEND listed ${name})
  endwhile()
  get_property(tests DIRECTORY PROPERTY TESTS)
  foreach(t ${tests})
    if(NOT t IN_LIST listed)
      message(FATAL_ERROR "test ${t} has no line in tests/suite.cmake (its labels and timeout)")
    endif()
  endforeach()
endfunction()
