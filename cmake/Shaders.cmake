# Compiles every shaders/<family>/*.comp to SPIR-V with glslc and embeds the
# words in a static library, so the binary never reads a shader file at run
# time. The folders are the kernel families: common (what every profile
# uses, and the shared .glsl includes), default (the fp32 and bf16 kernels)
# and reproducible (the reproducible mode's). Includes resolve across
# the three.
#
# A shader may declare variants on its first lines:
#   // variant: NAME -DDEFINE=VALUE ...
# Each variant is compiled as <file>_<NAME>; a file without variant lines is
# compiled once under its own name. Each SPIR-V module becomes its own .c
# file, so editing one shader recompiles only that module (glslc's depfile
# tracks the .glsl includes).
#
# The kernel table: shader_ids.h (include "vktrain/shader_ids.h") holds one
# enum constant SHADER_<module> per module, and shader_index.c the table
# indexed by it (name, file, family, the variant's defines, the words), so
# that C code names a module by its constant: a misspelt or missing variant
# is a compile error, not a run-time one. `vktrain devices --list-kernels`
# prints the table.
#
# A line "// needs: FEATURE" makes the variants after it need a compiler
# feature: coopmat (GL_KHR_cooperative_matrix) or coopmat_bf16 (with
# GL_EXT_bfloat16). Those compile with VKTRAIN_GLSLC_COOPMAT (a command),
# by default the system's glslc where it has the feature, else the one of
# scripts/sid.sh's tree where that is present; where none has it, the
# variants keep their constants but no words (the program says so where
# they are asked for).

# Whether the command in list `cmd` compiles a shader that uses `feature`.
function(vktrain_glslc_has cmd feature out)
  set(probe ${CMAKE_SOURCE_DIR}/cmake/coopmat_probe.comp)
  set(bf16 0)
  if(feature STREQUAL "coopmat_bf16")
    set(bf16 1)
  endif()
  execute_process(COMMAND ${cmd} --target-env=vulkan1.2 -DBF16=${bf16} -o ${CMAKE_BINARY_DIR}/shaders/probe_${feature}.spv ${probe}
                  RESULT_VARIABLE rc OUTPUT_QUIET ERROR_QUIET)
  if(rc EQUAL 0)
    set(${out} 1 PARENT_SCOPE)
  else()
    set(${out} 0 PARENT_SCOPE)
  endif()
endfunction()

# COOPMAT_GLSLC / COOPMAT_BF16_GLSLC: the command for each feature, or empty.
function(vktrain_find_coopmat_glslc)
  set(VKTRAIN_GLSLC_COOPMAT "" CACHE STRING
      "glslc command for the cooperative-matrix shaders (empty: the system's where it can, else scripts/sid.sh's)")
  set(cands "")
  if(VKTRAIN_GLSLC_COOPMAT)
    list(APPEND cands "${VKTRAIN_GLSLC_COOPMAT}")
  else()
    list(APPEND cands "${GLSLC}")
    execute_process(COMMAND ${CMAKE_SOURCE_DIR}/scripts/sid.sh root
                    RESULT_VARIABLE rc OUTPUT_VARIABLE root ERROR_QUIET OUTPUT_STRIP_TRAILING_WHITESPACE)
    if(rc EQUAL 0)
      list(APPEND cands "${CMAKE_SOURCE_DIR}/scripts/sid.sh run ${root}/usr/bin/glslc")
    endif()
  endif()
  foreach(feature coopmat coopmat_bf16)
    set(found "")
    foreach(cand ${cands})
      separate_arguments(cmd UNIX_COMMAND "${cand}")
      vktrain_glslc_has("${cmd}" ${feature} ok)
      if(ok AND NOT found)
        set(found "${cmd}")
      endif()
    endforeach()
    string(TOUPPER ${feature} up)
    set(${up}_GLSLC "${found}" PARENT_SCOPE)
    if(found)
      string(JOIN " " shown ${found})
      message(STATUS "shaders needing ${feature}: ${shown}")
    else()
      message(STATUS "shaders needing ${feature}: left out (no glslc here compiles them; scripts/sid.sh fetch makes one)")
    endif()
  endforeach()
endfunction()

function(vktrain_add_shaders target dir)
  set(families common default reproducible)
  set(comps "")
  set(incs "")
  foreach(family ${families})
    file(GLOB fcomps CONFIGURE_DEPENDS ${dir}/${family}/*.comp)
    list(APPEND comps ${fcomps})
    list(APPEND incs -I${dir}/${family})
  endforeach()
  file(GLOB stray CONFIGURE_DEPENDS ${dir}/*.comp ${dir}/*.glsl)
  if(stray)
    message(FATAL_ERROR "shaders outside a family folder (${families}): ${stray}")
  endif()
  set(gen ${CMAKE_BINARY_DIR}/shaders)
  file(MAKE_DIRECTORY ${gen}/include/vktrain)
  vktrain_find_coopmat_glslc()
  set(sources "")
  set(names "")
  set(rows "")
  set(externs "")
  foreach(comp ${comps})
    get_filename_component(base ${comp} NAME_WE)
    get_filename_component(fdir ${comp} DIRECTORY)
    get_filename_component(family ${fdir} NAME)
    set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${comp})
    file(STRINGS ${comp} vlines REGEX "^// (variant|needs): ")
    if(NOT vlines)
      set(vlines "// variant: - ")
    endif()
    set(compiler ${GLSLC})
    set(need "")
    foreach(vline ${vlines})
      if(vline MATCHES "^// needs: *([a-z0-9_]+)")
        string(TOUPPER ${CMAKE_MATCH_1} up)
        if(NOT DEFINED ${up}_GLSLC)
          message(FATAL_ERROR "${comp}: unknown need '${CMAKE_MATCH_1}' (coopmat, coopmat_bf16)")
        endif()
        set(compiler "${${up}_GLSLC}")
        set(need ${CMAKE_MATCH_1})
        continue()
      endif()
      string(REGEX REPLACE "^// variant: *" "" spec "${vline}")
      separate_arguments(spec UNIX_COMMAND "${spec}")
      list(POP_FRONT spec vname)
      if(vname STREQUAL "-")
        set(name ${base})
      else()
        set(name ${base}_${vname})
      endif()
      if(name IN_LIST names)
        message(FATAL_ERROR "${comp}: module name '${name}' declared twice")
      endif()
      list(APPEND names ${name})
      string(JOIN " " defines ${spec})
      if(NOT compiler)
        string(APPEND rows "  [SHADER_${name}] = {\"${name}\", \"${family}/${base}.comp\", \"${family}\", \"${defines}\", \"${need}\", NULL, NULL},\n")
        continue()
      endif()
      set(spv ${gen}/${name}.spv)
      set(csrc ${gen}/${name}.spv.c)
      add_custom_command(
        OUTPUT ${csrc}
        COMMAND ${compiler} --target-env=vulkan1.2 -O -MD -MF ${spv}.d -MT ${csrc} ${spec}
                ${incs} -o ${spv} ${comp}
        COMMAND ${CMAKE_COMMAND} -DSPV=${spv} -DOUT=${csrc} -DNAME=${name}
                -P ${CMAKE_SOURCE_DIR}/cmake/EmbedSpirv.cmake
        DEPENDS ${comp} ${CMAKE_SOURCE_DIR}/cmake/EmbedSpirv.cmake
        DEPFILE ${spv}.d
        COMMENT "glslc ${name}"
        VERBATIM)
      list(APPEND sources ${csrc})
      string(APPEND rows "  [SHADER_${name}] = {\"${name}\", \"${family}/${base}.comp\", \"${family}\", \"${defines}\", \"${need}\", spv_${name}, &spv_${name}_size},\n")
      string(APPEND externs "extern const uint32_t spv_${name}[];\nextern const size_t spv_${name}_size;\n")
    endforeach()
  endforeach()

  set(ids "/* Generated by cmake/Shaders.cmake from the shaders' variant lines: one\n")
  string(APPEND ids " * constant per SPIR-V module, the index of shader_blobs[]. */\n")
  string(APPEND ids "#ifndef VKTRAIN_SHADER_IDS_H\n#define VKTRAIN_SHADER_IDS_H\nenum shader_id {\n  SHADER_NONE, /* no module: a zeroed description */\n")
  foreach(name ${names})
    string(APPEND ids "  SHADER_${name},\n")
  endforeach()
  string(APPEND ids "  SHADER_COUNT\n};\n#endif\n")
  file(CONFIGURE OUTPUT ${gen}/include/vktrain/shader_ids.h CONTENT "${ids}")

  set(index "/* Generated by cmake/Shaders.cmake: every SPIR-V module, by shader_id. */\n")
  string(APPEND index "#include <stddef.h>\n#include <stdint.h>\n#include \"vktrain/shaders.h\"\n")
  string(APPEND index "${externs}")
  string(APPEND index "const struct shader_blob shader_blobs[SHADER_COUNT] = {\n  [SHADER_NONE] = {\"(none)\", \"\", \"\", \"\", \"\", NULL, NULL},\n${rows}};\n")
  file(CONFIGURE OUTPUT ${gen}/shader_index.c CONTENT "${index}")

  add_library(${target} STATIC ${sources} ${gen}/shader_index.c)
  target_include_directories(${target} PUBLIC ${CMAKE_SOURCE_DIR}/include ${gen}/include)
endfunction()
