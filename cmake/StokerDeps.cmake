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

# Debian ships OpenCV's imgproc without a CMake package in libopencv-imgproc-dev.
find_path(OPENCV_INCLUDE_DIR opencv2/imgproc.hpp PATH_SUFFIXES opencv4 REQUIRED)
find_library(OPENCV_CORE_LIB opencv_core REQUIRED)
find_library(OPENCV_IMGPROC_LIB opencv_imgproc REQUIRED)
add_library(stoker_opencv INTERFACE)
target_include_directories(stoker_opencv SYSTEM INTERFACE ${OPENCV_INCLUDE_DIR})
target_link_libraries(stoker_opencv INTERFACE ${OPENCV_IMGPROC_LIB} ${OPENCV_CORE_LIB})

find_program(GRPC_CPP_PLUGIN grpc_cpp_plugin REQUIRED)

# CUDA is optional: found, never required. GPU paths check at run time.
find_package(CUDAToolkit QUIET)
if(CUDAToolkit_FOUND)
  message(STATUS "CUDA toolkit ${CUDAToolkit_VERSION} found: GPU transports are built")
  set(STOKER_HAVE_CUDA ON)
else()
  message(STATUS "CUDA toolkit not found: GPU transports are off")
  set(STOKER_HAVE_CUDA OFF)
endif()
