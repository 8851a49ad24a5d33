# The libraries libmissile.so carries inside itself when MISSILE_SHIM_STATIC is on: gRPC,
# protobuf and abseil, all kept local to the shim (docs/interception.md, "A self-contained
# shim"). Sets MISSILE_SHIM_PIC_ARCHIVES (the archives, in link order)
# and MISSILE_SHIM_PIC_LINK_OPTIONS, and the external projects shim_pic_absl and shim_pic_protobuf.
#
# Debian 12's gRPC archives (libgrpc++_unsecure.a, libgrpc_unsecure.a, libgpr.a, libupb.a,
# libaddress_sorting.a) and libcares.a and libz.a are position-independent code and go in as
# they are. Its libabsl_*.a and libprotobuf.a cannot: they were compiled as position-independent
# executables, and four abseil members and protobuf's arena.o reach their thread-local variables
# in the local-exec model (R_X86_64_TPOFF32), which the linker refuses in a shared object. Those
# two are rebuilt here from Debian's own source packages, at exactly the installed versions and
# with Debian's patches (so the same inline namespace, absl::debian3, and the same ABI that the
# gRPC archives and the installed headers expect), with -fPIC and Debian's -O2 (no NDEBUG, as
# Debian builds them). Fetching needs the machine's apt sources (fetch_debian_source.sh); the
# build costs about what building abseil and libprotobuf costs, once per build directory.
include(ExternalProject)

set(shim_pic_root "${CMAKE_BINARY_DIR}/shim-pic-deps")
set(shim_pic_prefix "${shim_pic_root}/install")
set(shim_pic_fetch "${CMAKE_CURRENT_LIST_DIR}/fetch_debian_source.sh")

# The Debian source version of the installed package that provides `package`.
function(missile_source_version package out)
  execute_process(COMMAND dpkg-query -W "-f=\${source:Version}" ${package}
                  OUTPUT_VARIABLE version RESULT_VARIABLE rc ERROR_QUIET
                  OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT rc EQUAL 0 OR version STREQUAL "")
    message(FATAL_ERROR "MISSILE_SHIM_STATIC: ${package} is not installed (dpkg-query); "
                        "run scripts/install-deps.sh, or configure with -DMISSILE_SHIM_STATIC=OFF")
  endif()
  set(${out} "${version}" PARENT_SCOPE)
endfunction()
missile_source_version(libabsl-dev shim_absl_version)
missile_source_version(libprotobuf-dev shim_protobuf_version)

# Debian's archives, next to the shared libraries the rest of the build links.
set(shim_system_archives "")
foreach(name grpc++_unsecure grpc_unsecure gpr upb address_sorting cares z)
  find_library(MISSILE_SHIM_ARCHIVE_${name} NAMES lib${name}.a NO_CACHE)
  if(NOT MISSILE_SHIM_ARCHIVE_${name})
    message(FATAL_ERROR "MISSILE_SHIM_STATIC: lib${name}.a not found (libgrpc++-dev, "
                        "libc-ares-dev, zlib1g-dev); or configure with -DMISSILE_SHIM_STATIC=OFF")
  endif()
  list(APPEND shim_system_archives "${MISSILE_SHIM_ARCHIVE_${name}}")
endforeach()

# The abseil archives the rebuild installs have the names of Debian's (same source, same CMake).
get_filename_component(shim_system_libdir "${MISSILE_SHIM_ARCHIVE_gpr}" DIRECTORY)
file(GLOB shim_debian_absl RELATIVE "${shim_system_libdir}" "${shim_system_libdir}/libabsl_*.a")
list(SORT shim_debian_absl)
list(LENGTH shim_debian_absl shim_absl_count)
if(shim_absl_count EQUAL 0)
  message(FATAL_ERROR "MISSILE_SHIM_STATIC: no libabsl_*.a in ${shim_system_libdir} (libabsl-dev)")
endif()
list(TRANSFORM shim_debian_absl PREPEND "${shim_pic_prefix}/lib/" OUTPUT_VARIABLE shim_absl_archives)
set(shim_protobuf_archive "${shim_pic_prefix}/lib/libprotobuf.a")

set(shim_pic_cmake_args
  -DCMAKE_BUILD_TYPE=
  "-DCMAKE_C_FLAGS=-O2 -fPIC"
  "-DCMAKE_CXX_FLAGS=-O2 -fPIC -w"
  -DCMAKE_POSITION_INDEPENDENT_CODE=ON
  -DCMAKE_INSTALL_PREFIX=${shim_pic_prefix}
  -DCMAKE_INSTALL_LIBDIR=lib
  -DCMAKE_C_COMPILER=${CMAKE_C_COMPILER}
  -DCMAKE_CXX_COMPILER=${CMAKE_CXX_COMPILER})
if(CMAKE_CXX_COMPILER_LAUNCHER)
  list(APPEND shim_pic_cmake_args -DCMAKE_CXX_COMPILER_LAUNCHER=${CMAKE_CXX_COMPILER_LAUNCHER})
endif()
if(CMAKE_C_COMPILER_LAUNCHER)
  list(APPEND shim_pic_cmake_args -DCMAKE_C_COMPILER_LAUNCHER=${CMAKE_C_COMPILER_LAUNCHER})
endif()

# Debian builds abseil as C++17; the same standard keeps the same std:: choices in options.h.
ExternalProject_Add(shim_pic_absl
  PREFIX "${shim_pic_root}/absl"
  DOWNLOAD_COMMAND "${shim_pic_fetch}" abseil "${shim_absl_version}" <SOURCE_DIR>
  CMAKE_ARGS ${shim_pic_cmake_args} -DCMAKE_CXX_STANDARD=17 -DABSL_PROPAGATE_CXX_STD=ON
             -DBUILD_TESTING=OFF
  BUILD_BYPRODUCTS ${shim_absl_archives}
  EXCLUDE_FROM_ALL ON)

ExternalProject_Add(shim_pic_protobuf
  PREFIX "${shim_pic_root}/protobuf"
  DOWNLOAD_COMMAND "${shim_pic_fetch}" protobuf "${shim_protobuf_version}" <SOURCE_DIR>
  CMAKE_ARGS ${shim_pic_cmake_args} -Dprotobuf_BUILD_TESTS=OFF
             -Dprotobuf_BUILD_PROTOC_BINARIES=OFF -Dprotobuf_WITH_ZLIB=OFF
             -Dprotobuf_BUILD_SHARED_LIBS=OFF
  BUILD_COMMAND ${CMAKE_COMMAND} --build <BINARY_DIR> --target libprotobuf
  # Only the archive: the headers are the installed ones, and the lite library is not needed.
  INSTALL_COMMAND ${CMAKE_COMMAND} -E make_directory "${shim_pic_prefix}/lib"
          COMMAND ${CMAKE_COMMAND} -E copy <BINARY_DIR>/libprotobuf.a "${shim_pic_prefix}/lib/"
  BUILD_BYPRODUCTS "${shim_protobuf_archive}"
  EXCLUDE_FROM_ALL ON)

# For libintercept/CMakeLists.txt, which puts them in one group with the shim's own static
# libraries, scanned until nothing new is pulled in (gRPC needs abseil, abseil's members need one
# another). --exclude-libs keeps every symbol from these archives out of the shim's dynamic
# symbol table, on top of missile.map; --as-needed drops the shared gRPC, protobuf and abseil
# libraries that the shim's own static libraries name, once the group resolved everything.
# libstdc++ and libgcc_s stay shared on purpose: linked statically, std::random_device
# (arc4random) and the unwinder (_dl_find_object) raise the glibc floor from 2.34 to 2.36,
# which Ubuntu 22.04 and RHEL 9 images do not meet, while every distribution with glibc 2.34
# ships a libstdc++ with GLIBCXX_3.4.29, the newest the shim needs (docs/interception.md).
set(MISSILE_SHIM_PIC_ARCHIVES ${shim_system_archives} "${shim_protobuf_archive}"
    ${shim_absl_archives})
set(MISSILE_SHIM_PIC_LINK_OPTIONS -Wl,--exclude-libs,ALL -Wl,--as-needed)
