# The Debian package (cpack -G DEB in the build directory, or the `package` target): everything
# cmake/install.cmake installs, under /usr, with /etc/missile/missiled.toml as a conffile and
# maintainer scripts that create the missile group and /run/missile (deploy/package/).
# tests/package/package_test.sh builds, inspects, installs and purges it.
if(NOT TARGET missiled)
  return()
endif()

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME missile)
set(CPACK_PACKAGE_VERSION "${PROJECT_VERSION}")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "Shares one NVIDIA GPU between latency-sensitive and best-effort inference services")
set(CPACK_DEBIAN_PACKAGE_DESCRIPTION
    "missiled owns the GPU memory and hands it out within per-tenant and per-class quotas,
schedules the tenants' host-device copies over PCIe and paces best-effort GPU work next to
latency-sensitive work. Tenants run unchanged under libmissile.so (missile-run); missilectl
shows and changes the policy. missiled needs the NVIDIA driver to serve.")
set(MISSILE_PACKAGE_MAINTAINER "Missile maintainers <missile@localhost>"
    CACHE STRING "Maintainer field of the Debian package")
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "${MISSILE_PACKAGE_MAINTAINER}")
set(CPACK_DEBIAN_PACKAGE_SECTION utils)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_OUTPUT_FILE_PREFIX "${PROJECT_BINARY_DIR}/package")
set(CPACK_PACKAGE_DIRECTORY "${PROJECT_BINARY_DIR}/package/_cpack")
# Install with DESTDIR into the staging directory and the prefix /usr, so that absolute
# destinations (/etc/missile) land in the package and the unit's ExecStart reads /usr/bin.
set(CPACK_SET_DESTDIR ON)
set(CPACK_INSTALL_PREFIX /usr)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
# Depends from the libraries the binaries link (gRPC, protobuf, Abseil, spdlog, fmt).
# missile-calibrate links libcuda.so.1, which comes with the NVIDIA driver and no Debian
# package: the toolkit's stub stands in for it, as a private library needing no dependency.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
if(TARGET missile-calibrate)
  set(stub_dir "${PROJECT_BINARY_DIR}/package/cuda-stub")
  file(MAKE_DIRECTORY "${stub_dir}")
  file(CREATE_LINK "${MISSILE_CUDA_STUB}" "${stub_dir}/libcuda.so.1" SYMBOLIC)
  set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS "${stub_dir}")
endif()
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "systemd")

file(WRITE "${PROJECT_BINARY_DIR}/package/control/conffiles" "/etc/missile/missiled.toml\n")
foreach(script postinst prerm postrm)
  file(COPY "${PROJECT_SOURCE_DIR}/deploy/package/${script}"
       DESTINATION "${PROJECT_BINARY_DIR}/package/control"
       FILE_PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE
                        WORLD_READ WORLD_EXECUTE)
endforeach()
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
    "${PROJECT_BINARY_DIR}/package/control/conffiles;${PROJECT_BINARY_DIR}/package/control/postinst;${PROJECT_BINARY_DIR}/package/control/prerm;${PROJECT_BINARY_DIR}/package/control/postrm")
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION TRUE)

include(CPack)
