# One library per floor (docs/design.md, Floors): core → devices → autograd → layers, optim →
# datasets → app. Each links the floor below it PUBLIC, so the link line runs top-down as a
# static link needs, and each sees the headers of its own floor and the floors below, never
# those above.
#
# How an upward include becomes a build error: the headers all live under the source root,
# and `-I <root>` would let any file include any other. So no target gets the root. Each
# floor gets a folder of its own in the build tree, holding symlinks to its source folders
# only (build/floors/autograd/autograd → autograd/), and that folder is the floor's PUBLIC
# include directory. A floor's compile line thus lists its own folder and, through the
# PUBLIC links, those of the floors below: `#include "layers/module.h"` in autograd/ finds no
# such file ("fatal error: layers/module.h: No such file or directory"). scripts/
# include_floors.py (the CTest test include_floors) lists every include with its floors, and
# also fails on an include of devices/cpu/ from outside devices/: the floors allow it (devices
# is below them all), but the program reaches the CPU through devices/host_cpu.h.

set(NNLAB_FLOORS_DIR ${CMAKE_CURRENT_BINARY_DIR}/floors)

# nnlab_floor(<floor> DIRS <source folders> [BELOW <library>] SOURCES <files...>)
# Adds the library nnlab_<floor> with the warnings and code-generation flags every floor of
# the library shares (the app's own flags are set where it is added).
function(nnlab_floor floor)
  cmake_parse_arguments(ARG "" "BELOW" "DIRS;SOURCES" ${ARGN})
  set(include_dir ${NNLAB_FLOORS_DIR}/${floor})
  file(MAKE_DIRECTORY ${include_dir})
  foreach(dir ${ARG_DIRS})
    file(CREATE_LINK ${PROJECT_SOURCE_DIR}/${dir} ${include_dir}/${dir} SYMBOLIC)
  endforeach()
  add_library(nnlab_${floor} STATIC ${ARG_SOURCES})
  # Installed, all floors share include/nnlab (install.cmake's INCLUDES DESTINATION).
  target_include_directories(nnlab_${floor} PUBLIC $<BUILD_INTERFACE:${include_dir}>)
  if(ARG_BELOW)
    target_link_libraries(nnlab_${floor} PUBLIC ${ARG_BELOW})
  endif()
  target_compile_options(nnlab_${floor} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra>)
  # std::sqrt must set errno on a negative argument unless told otherwise, and that kept every
  # loop that takes a square root scalar (the Adam step: 0.53 ms for the cnn's 401,408-weight
  # layer). nnlab never reads errno; sqrt itself stays correctly rounded, so results do not change.
  target_compile_options(nnlab_${floor} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-fno-math-errno>)
  # The portable baseline (x86-64-v3, tuned for this machine; CMakeLists.txt): never
  # -march=native, which would let AVX-512 into code that AVX2-only CPUs must run.
  if(NNLAB_BASELINE_FLAGS)
    target_compile_options(nnlab_${floor} PRIVATE "$<$<COMPILE_LANGUAGE:CXX>:${NNLAB_BASELINE_FLAGS}>")
  endif()
  # Users of the installed targets compile as C++17, as nnlab's headers need.
  target_compile_features(nnlab_${floor} PUBLIC cxx_std_17)
endfunction()
