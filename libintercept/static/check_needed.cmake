# Checks that libmissile.so is self-contained (MISSILE_SHIM_STATIC):
#  - it needs no shared library beyond the C and C++ runtimes (NEEDED);
#  - it takes no gRPC, protobuf, abseil, upb, c-ares or zlib symbol from the process (its
#    undefined dynamic symbols), so a tenant's own copies are never bound to the shim's code,
#    nor the shim's to the tenant;
#  - its floors stay where docs/interception.md says they are: glibc 2.34, GLIBCXX_3.4.29.
# Prints the NEEDED entries and both floors.
# Run by ctest: cmake -DSHIM=... -P check_needed.cmake
cmake_minimum_required(VERSION 3.25)
execute_process(COMMAND readelf -d ${SHIM} OUTPUT_VARIABLE dynamic RESULT_VARIABLE rc1)
execute_process(COMMAND objdump -T ${SHIM} OUTPUT_VARIABLE symbols RESULT_VARIABLE rc2)
if(rc1 OR rc2)
  message(FATAL_ERROR "readelf or objdump failed on ${SHIM}")
endif()

set(allowed libc.so.6 libm.so.6 libdl.so.2 librt.so.1 libpthread.so.0 libstdc++.so.6
            libgcc_s.so.1 ld-linux-x86-64.so.2)
string(REGEX MATCHALL "\\(NEEDED\\)[^\n]*" needed_lines "${dynamic}")
set(needed "")
set(unexpected "")
foreach(line ${needed_lines})
  string(REGEX REPLACE "^.*Shared library: \\[" "" lib "${line}")
  string(REGEX REPLACE "\\].*$" "" lib "${lib}")
  list(APPEND needed ${lib})
  if(NOT lib IN_LIST allowed)
    list(APPEND unexpected ${lib})
  endif()
endforeach()
if(unexpected)
  message(FATAL_ERROR "libmissile.so needs shared libraries beyond the C and C++ runtimes: "
                      "${unexpected} (all NEEDED: ${needed})")
endif()

# Undefined dynamic symbols ("*UND*") that belong to the libraries the shim carries itself.
string(REGEX MATCHALL "[^\n]*\\*UND\\*[^\n]*" undefined "${symbols}")
set(leaks "")
foreach(line ${undefined})
  string(REGEX REPLACE "^.* ([^ ]+)$" "\\1" name "${line}")
  if(name MATCHES "^_ZN?K?(6google|4grpc|9grpc_core|4absl|3upb)|^(grpc|gpr|upb|ares|address_sorting)_|^(inflate|deflate|crc32|adler32)")
    list(APPEND leaks "${name}")
  endif()
endforeach()
if(leaks)
  list(REMOVE_DUPLICATES leaks)
  list(LENGTH leaks n)
  if(n GREATER 10)
    list(SUBLIST leaks 0 10 leaks)
  endif()
  message(FATAL_ERROR "libmissile.so takes ${n} symbols of the libraries it should carry from "
                      "the process, e.g.: ${leaks}")
endif()

# The highest version of `prefix` (GLIBC or GLIBCXX) that the shim's symbols need.
function(highest prefix out)
  string(REGEX MATCHALL "\\(${prefix}_[0-9.]+\\)" versions "${symbols}")
  set(top 0)
  foreach(v ${versions})
    string(REGEX REPLACE "^\\(${prefix}_([0-9.]+)\\)$" "\\1" num "${v}")
    if(num VERSION_GREATER top)
      set(top "${num}")
    endif()
  endforeach()
  set(${out} "${top}" PARENT_SCOPE)
endfunction()
highest(GLIBC glibc)
highest(GLIBCXX glibcxx)
if(glibc VERSION_GREATER 2.34)
  message(FATAL_ERROR "libmissile.so needs GLIBC_${glibc}, above the documented floor 2.34")
endif()
if(glibcxx VERSION_GREATER 3.4.29)
  message(FATAL_ERROR "libmissile.so needs GLIBCXX_${glibcxx}, above the documented 3.4.29")
endif()
message(STATUS "libmissile.so needs only ${needed}; floors: GLIBC_${glibc}, GLIBCXX_${glibcxx}")
