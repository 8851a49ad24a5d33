# Checks that libmissile.so is self-contained (MISSILE_SHIM_STATIC): it needs no shared library
# beyond the C runtime's (NEEDED), and it takes no gRPC, protobuf, abseil, c-ares, zlib or C++
# runtime symbol from the process (its undefined dynamic symbols), so a tenant's own copies of
# those are never bound to the shim, nor the shim's to the tenant. Prints the glibc floor: the
# highest GLIBC_x.y version the shim's symbols need.
# Run by ctest: cmake -DSHIM=... -P check_needed.cmake
execute_process(COMMAND readelf -d ${SHIM} OUTPUT_VARIABLE dynamic RESULT_VARIABLE rc1)
execute_process(COMMAND objdump -T ${SHIM} OUTPUT_VARIABLE symbols RESULT_VARIABLE rc2)
if(rc1 OR rc2)
  message(FATAL_ERROR "readelf or objdump failed on ${SHIM}")
endif()

set(allowed libc.so.6 libm.so.6 libdl.so.2 librt.so.1 libpthread.so.0 libstdc++.so.6
            libgcc_s.so.1 ld-linux-x86-64.so.2)
string(REGEX MATCHALL "\\(NEEDED\\)[^\n]*\\[[^]\n]+\\]" needed_lines "${dynamic}")
set(needed "")
set(unexpected "")
foreach(line ${needed_lines})
  string(REGEX REPLACE "^.*\\[([^]]+)\\]$" "\\1" lib "${line}")
  list(APPEND needed ${lib})
  if(NOT lib IN_LIST allowed)
    list(APPEND unexpected ${lib})
  endif()
endforeach()
if(unexpected)
  message(FATAL_ERROR "libmissile.so needs shared libraries beyond the C runtime: ${unexpected} "
                      "(all NEEDED: ${needed})")
endif()

# Undefined dynamic symbols ("*UND*") that belong to the libraries the shim must carry itself.
string(REGEX MATCHALL "[^\n]*\\*UND\\*[^\n]*" undefined "${symbols}")
set(leaks "")
foreach(line ${undefined})
  string(REGEX REPLACE "^.* ([^ ]+)$" "\\1" name "${line}")
  if(name MATCHES "^_ZN?K?(6google|4grpc|9grpc_core|4absl|3upb)|^(grpc|gpr|upb|ares|address_sorting)_|^(inflate|deflate)|^_ZSt|^_ZNSt|^_ZNKSt|^__cxa_(throw|begin_catch|allocate_exception)|^_Znwm|^_ZdlPv|GLIBCXX|CXXABI")
    list(APPEND leaks "${name}")
  endif()
  if(line MATCHES "GLIBCXX_|CXXABI_")
    list(APPEND leaks "${name}")
  endif()
endforeach()
if(leaks)
  list(REMOVE_DUPLICATES leaks)
  list(LENGTH leaks n)
  list(SUBLIST leaks 0 10 some)
  message(FATAL_ERROR "libmissile.so takes ${n} symbols of its bundled libraries from the "
                      "process, e.g.: ${some}")
endif()

string(REGEX MATCHALL "GLIBC_[0-9]+\\.[0-9]+(\\.[0-9]+)?" versions "${symbols}")
list(REMOVE_DUPLICATES versions)
set(floor "GLIBC_0.0")
foreach(v ${versions})
  string(REPLACE "GLIBC_" "" num "${v}")
  string(REPLACE "GLIBC_" "" top "${floor}")
  if(num VERSION_GREATER top)
    set(floor "${v}")
  endif()
endforeach()
message(STATUS "libmissile.so needs only ${needed}; glibc floor ${floor}")
