# Finds Strata's dependencies, all from Debian packages (scripts/setup installs them).

find_package(OpenMP REQUIRED)
find_package(Threads REQUIRED)
find_package(MPI REQUIRED COMPONENTS CXX)
find_package(fmt REQUIRED)
find_package(spdlog REQUIRED)
find_package(tomlplusplus REQUIRED)
find_package(CLI11 REQUIRED)
find_package(nlohmann_json REQUIRED)

# OpenBLAS is linked by its full path, never through libblas.so.3: Debian's alternatives may
# point that name at the slow reference BLAS. The OpenMP build shares libgomp with our kernels,
# so its threads and ours do not fight.
set(STRATA_OPENBLAS_DIR "/usr/lib/${CMAKE_LIBRARY_ARCHITECTURE}/openblas-openmp"
    CACHE PATH "Directory holding the OpenMP build of libopenblas")
find_library(STRATA_OPENBLAS_LIBRARY NAMES openblas PATHS "${STRATA_OPENBLAS_DIR}" NO_DEFAULT_PATH)
find_path(STRATA_OPENBLAS_INCLUDE NAMES cblas.h
          PATHS "/usr/include/${CMAKE_LIBRARY_ARCHITECTURE}/openblas-openmp" NO_DEFAULT_PATH)
if(NOT STRATA_OPENBLAS_LIBRARY OR NOT STRATA_OPENBLAS_INCLUDE)
  message(FATAL_ERROR "OpenBLAS (OpenMP build) not found under ${STRATA_OPENBLAS_DIR}; run scripts/setup "
                      "(package libopenblas-openmp-dev) or set STRATA_OPENBLAS_DIR.")
endif()
add_library(strata_openblas INTERFACE)
target_link_libraries(strata_openblas INTERFACE "${STRATA_OPENBLAS_LIBRARY}")
target_include_directories(strata_openblas SYSTEM INTERFACE "${STRATA_OPENBLAS_INCLUDE}")
message(STATUS "Strata BLAS: ${STRATA_OPENBLAS_LIBRARY}")

# oneDNN (libdnnl-dev), optional: the default matmul where it is found; OpenBLAS otherwise, and the
# build says so. STRATA_WITH_ONEDNN=OFF builds without it even where it is installed.
# Found by its header and library, not through Debian's dnnl-config.cmake: that file requires the
# OpenCL headers (find_package(OpenCL REQUIRED), for oneDNN's GPU runtime), which libdnnl-dev only
# recommends, and Strata uses only the CPU engine. The OpenCL loader libdnnl.so itself links
# (ocl-icd-libopencl1) is a hard dependency of libdnnl2, so the link needs nothing more.
add_library(strata_onednn INTERFACE)
if(STRATA_WITH_ONEDNN)
  find_path(STRATA_ONEDNN_INCLUDE NAMES oneapi/dnnl/dnnl.hpp)
  find_library(STRATA_ONEDNN_LIBRARY NAMES dnnl)
endif()
if(STRATA_WITH_ONEDNN AND STRATA_ONEDNN_INCLUDE AND STRATA_ONEDNN_LIBRARY)
  file(STRINGS "${STRATA_ONEDNN_INCLUDE}/oneapi/dnnl/dnnl_version.h" onednn_version_lines
       REGEX "^#define DNNL_VERSION_(MAJOR|MINOR|PATCH) ")
  string(REGEX REPLACE ".*MAJOR ([0-9]+).*MINOR ([0-9]+).*PATCH ([0-9]+).*" "\\1.\\2.\\3"
         onednn_version "${onednn_version_lines}")
  target_link_libraries(strata_onednn INTERFACE "${STRATA_ONEDNN_LIBRARY}")
  target_include_directories(strata_onednn SYSTEM INTERFACE "${STRATA_ONEDNN_INCLUDE}")
  target_compile_definitions(strata_onednn INTERFACE STRATA_HAVE_ONEDNN)
  message(STATUS "Strata matmul: oneDNN ${onednn_version} (${STRATA_ONEDNN_LIBRARY}, default), OpenBLAS and the reference loops")
elseif(NOT STRATA_WITH_ONEDNN)
  message(STATUS "Strata matmul: oneDNN left out (STRATA_WITH_ONEDNN=OFF): OpenBLAS (default) and the reference loops")
else()
  message(STATUS "Strata matmul: oneDNN not found (scripts/setup installs libdnnl-dev): OpenBLAS (default) and the "
                 "reference loops only")
endif()

# xxHash (checkpoint checksums), found by header and library.
find_path(STRATA_XXHASH_INCLUDE NAMES xxhash.h)
find_library(STRATA_XXHASH_LIBRARY NAMES xxhash)
if(NOT STRATA_XXHASH_INCLUDE OR NOT STRATA_XXHASH_LIBRARY)
  message(FATAL_ERROR "xxHash not found; run scripts/setup (package libxxhash-dev).")
endif()
add_library(strata_xxhash INTERFACE)
target_link_libraries(strata_xxhash INTERFACE "${STRATA_XXHASH_LIBRARY}")
target_include_directories(strata_xxhash SYSTEM INTERFACE "${STRATA_XXHASH_INCLUDE}")

# hwloc (libhwloc-dev): the machine's packages, NUMA nodes and caches, for --topology auto.
find_package(PkgConfig REQUIRED)
pkg_check_modules(STRATA_HWLOC IMPORTED_TARGET hwloc)
if(NOT STRATA_HWLOC_FOUND)
  message(FATAL_ERROR "hwloc not found; run scripts/setup (package libhwloc-dev).")
endif()
add_library(strata_hwloc INTERFACE)
target_link_libraries(strata_hwloc INTERFACE PkgConfig::STRATA_HWLOC)
