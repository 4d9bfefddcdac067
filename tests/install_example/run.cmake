# CTest driver (tests/CMakeLists.txt, test "install_example"): installs the built nnlab into a
# fresh prefix, configures and builds tests/install_example against that prefix only, and
# runs it. Variables: NNLAB_BUILD_DIR, EXAMPLE_DIR, WORK_DIR, CXX_COMPILER, PREFIX_PATH
# (extra prefixes for the dependencies, '|'-separated).
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
string(REPLACE "|" ";" extra_prefixes "${PREFIX_PATH}")

function(step name)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "install_example: ${name} failed (${rc}):\n${out}\n${err}")
  endif()
  message(STATUS "${name}: ok\n${out}")
endfunction()

step("cmake --install" ${CMAKE_COMMAND} --install ${NNLAB_BUILD_DIR} --prefix ${WORK_DIR}/prefix)
if(NOT EXISTS ${WORK_DIR}/prefix/lib/cmake/nnlab/nnlabConfig.cmake OR
   NOT EXISTS ${WORK_DIR}/prefix/include/nnlab/core/tensor.h)
  message(FATAL_ERROR "install_example: the install prefix lacks nnlabConfig.cmake or the headers")
endif()
step("configure the example" ${CMAKE_COMMAND} -S ${EXAMPLE_DIR} -B ${WORK_DIR}/build
     -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER=${CXX_COMPILER}
     "-DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix;${extra_prefixes}")
step("build the example" ${CMAKE_COMMAND} --build ${WORK_DIR}/build)
step("run the example" ${WORK_DIR}/build/nnlab_example ${WORK_DIR}/model.safetensors)
if(NOT EXISTS ${WORK_DIR}/model.safetensors)
  message(FATAL_ERROR "install_example: the example wrote no checkpoint")
endif()
