# Finds every dependency from Debian's packages and gives each an imported target.
find_package(PkgConfig REQUIRED)
find_package(Threads REQUIRED)
find_package(absl CONFIG REQUIRED)
find_package(Protobuf REQUIRED)
find_package(gRPC CONFIG REQUIRED)
find_package(yaml-cpp CONFIG REQUIRED)
find_package(nlohmann_json CONFIG REQUIRED)
find_package(CLI11 CONFIG REQUIRED)
find_package(libjpeg-turbo CONFIG REQUIRED)
find_package(PNG REQUIRED)
pkg_check_modules(LMDB REQUIRED IMPORTED_TARGET lmdb)
pkg_check_modules(XXHASH REQUIRED IMPORTED_TARGET libxxhash)
pkg_check_modules(ZSTD REQUIRED IMPORTED_TARGET libzstd)

# Debian ships OpenCV's imgproc without a CMake package in libopencv-imgproc-dev.
find_path(OPENCV_INCLUDE_DIR opencv2/imgproc.hpp PATH_SUFFIXES opencv4 REQUIRED)
find_library(OPENCV_CORE_LIB opencv_core REQUIRED)
find_library(OPENCV_IMGPROC_LIB opencv_imgproc REQUIRED)
add_library(stoker_opencv INTERFACE)
target_include_directories(stoker_opencv SYSTEM INTERFACE ${OPENCV_INCLUDE_DIR})
target_link_libraries(stoker_opencv INTERFACE ${OPENCV_IMGPROC_LIB} ${OPENCV_CORE_LIB})

# Optional image decoders: WebP through libwebp (libwebp-dev), TIFF through
# libtiff (libtiff-dev), each used when found unless turned off
# (-DSTOKER_WEBP=OFF, -DSTOKER_TIFF=OFF: how the built-without refusals are
# tested). Without them those formats are refused with FailedPrecondition
# naming the package. (OpenCV's imgcodecs would add TIFF and BMP too, but
# maps 139 libraries, 177 MiB with GDAL, poppler and HDF5, into the daemon.)
option(STOKER_WEBP "Decode WebP with libwebp when it is found" ON)
option(STOKER_TIFF "Decode TIFF with libtiff when it is found" ON)
if(STOKER_WEBP)
  pkg_check_modules(WEBP QUIET IMPORTED_TARGET libwebp)
endif()
if(WEBP_FOUND)
  add_library(stoker_webp INTERFACE)
  target_link_libraries(stoker_webp INTERFACE PkgConfig::WEBP)
  message(STATUS "WebP decoder: on (libwebp ${WEBP_VERSION})")
else()
  message(STATUS "WebP decoder: off (STOKER_WEBP=OFF or no libwebp-dev)")
endif()
if(STOKER_TIFF)
  pkg_check_modules(TIFF QUIET IMPORTED_TARGET libtiff-4>=4.5)
endif()
if(TIFF_FOUND)
  add_library(stoker_tiff INTERFACE)
  target_link_libraries(stoker_tiff INTERFACE PkgConfig::TIFF)
  message(STATUS "TIFF decoder: on (libtiff ${TIFF_VERSION})")
else()
  message(STATUS "TIFF decoder: off (STOKER_TIFF=OFF or no libtiff-dev >= 4.5)")
endif()

find_program(GRPC_CPP_PLUGIN grpc_cpp_plugin REQUIRED)

# CUDA is optional (STOKER_CUDA, set in the top-level CMakeLists.txt). Only
# the runtime API is used, from C++, linked statically (CUDA::cudart_static):
# the binaries then need no libcudart.so and start on machines without a GPU
# or driver, where cudart loads libcuda.so.1 lazily and reports it missing.
# STOKER_CUDA_ENABLED says what was decided; server/cuda/ reads it.
string(TOUPPER "${STOKER_CUDA}" STOKER_CUDA)
if(NOT STOKER_CUDA MATCHES "^(AUTO|ON|OFF)$")
  message(FATAL_ERROR "STOKER_CUDA is '${STOKER_CUDA}': it must be AUTO, ON or OFF")
endif()
set(STOKER_CUDA_ENABLED OFF)
if(STOKER_CUDA STREQUAL "OFF")
  message(STATUS "CUDA support: off (STOKER_CUDA=OFF)")
else()
  find_package(CUDAToolkit QUIET)
  if(CUDAToolkit_FOUND AND TARGET CUDA::cudart_static)
    set(STOKER_CUDA_ENABLED ON)
    message(STATUS "CUDA support: on (STOKER_CUDA=${STOKER_CUDA}, CUDA toolkit "
      "${CUDAToolkit_VERSION} in ${CUDAToolkit_BIN_DIR}, runtime linked statically)")
    # The cuda_ipc transport's kernel (server/transport/cuda_ipc/*.cu) is
    # built by the toolkit's nvcc. No GPU is needed to build it: the
    # architectures are named, never detected. 75 and 80 as machine code
    # (Turing, CUDA 13's oldest, and Ampere), 90 (Hopper: H100, H200) as
    # machine code and PTX, which newer GPUs compile when they load it.
    if(NOT CMAKE_CUDA_COMPILER)
      set(CMAKE_CUDA_COMPILER "${CUDAToolkit_NVCC_EXECUTABLE}")
    endif()
    if(NOT CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES 75-real 80-real 90)
    endif()
    enable_language(CUDA)
    set(CMAKE_CUDA_STANDARD 17)
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    # cudart_static, as the C++ targets link it.
    set(CMAKE_CUDA_RUNTIME_LIBRARY Static)
  elseif(STOKER_CUDA STREQUAL "ON")
    message(FATAL_ERROR "STOKER_CUDA=ON but find_package(CUDAToolkit) found no CUDA "
      "toolkit with a static runtime (libcudart_static.a). Install one and point "
      "-DCUDAToolkit_ROOT (or the CUDA_PATH environment variable, or PATH to its "
      "nvcc) at it, or configure with "
      "-DSTOKER_CUDA=AUTO or OFF.")
  else()
    message(STATUS "CUDA support: off (STOKER_CUDA=AUTO and no CUDA toolkit found; "
      "set CUDAToolkit_ROOT to use one)")
  endif()
endif()
# Recorded in the cache for tools that read a build (tests/gpu/run.sh pack).
set(STOKER_CUDA_SUPPORT ${STOKER_CUDA_ENABLED} CACHE INTERNAL
  "Whether this build has CUDA support (cmake/StokerDeps.cmake)")
