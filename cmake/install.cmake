# Installation: the daemon, the tools, the shim, the unit, the example configuration, the
# systemd sysusers.d and tmpfiles.d entries, man pages and docs. Included by the top-level
# CMakeLists.txt once the modules are known; cmake/packaging.cmake turns the same rules into a
# Debian package. The driver test double (tests/fakecuda) is never installed.
include(GNUInstallDirs)
if(NOT TARGET missiled)
  return()
endif()

install(TARGETS missiled missilectl missile-run RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
if(TARGET missile-calibrate)  # built only where nvcc is found
  install(TARGETS missile-calibrate RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()
if(TARGET missile-webhook)  # the Kubernetes admission webhook (webhook/)
  install(TARGETS missile-webhook RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()
# lib/missile, not the multiarch library directory: missile-run looks for the shim as
# ../lib/missile/libmissile.so from its own directory, and the loader's cache (ldconfig) never
# scans lib/missile, so the shim's SONAME (libcuda.so.1) cannot shadow the real driver there.
install(TARGETS missile LIBRARY DESTINATION lib/missile)

# The unit starts missiled from the install prefix: ExecStart is rewritten at install time
# (cmake --install --prefix, or the package's /usr), so deploy/missiled.service stays a file
# that works as it is for the default prefix.
set(MISSILE_UNIT_SOURCE "${PROJECT_SOURCE_DIR}/deploy/missiled.service")
set(MISSILE_UNIT_BUILT "${PROJECT_BINARY_DIR}/deploy/missiled.service")
install(CODE "
  file(READ \"${MISSILE_UNIT_SOURCE}\" unit)
  string(REPLACE \"ExecStart=/usr/local/bin/missiled\"
         \"ExecStart=\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_BINDIR}/missiled\" unit \"\${unit}\")
  file(WRITE \"${MISSILE_UNIT_BUILT}\" \"\${unit}\")
  file(INSTALL DESTINATION \"\${CMAKE_INSTALL_PREFIX}/lib/systemd/system\" TYPE FILE
       PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ FILES \"${MISSILE_UNIT_BUILT}\")
")

# The configuration is the administrator's once installed: an existing
# /etc/missile/missiled.toml is never overwritten (the package marks it a conffile, so dpkg
# asks before replacing an edited one).
set(MISSILE_CONFIG_SOURCE "${PROJECT_SOURCE_DIR}/deploy/missiled.toml")
install(CODE "
  set(dest \"\$ENV{DESTDIR}/etc/missile/missiled.toml\")
  if(EXISTS \"\${dest}\")
    message(STATUS \"Kept (not overwritten): \${dest}\")
  else()
    file(INSTALL DESTINATION /etc/missile TYPE FILE
         PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ FILES \"${MISSILE_CONFIG_SOURCE}\")
  endif()
")

install(FILES deploy/package/missile.sysusers DESTINATION lib/sysusers.d RENAME missile.conf)
install(FILES deploy/package/missile.tmpfiles DESTINATION lib/tmpfiles.d RENAME missile.conf)

# Man pages from each tool's --help and --version (help2man; Debian package help2man). The
# tools print both without a driver, except missile-calibrate, which links the driver and runs
# on the test double's library when that is built.
find_program(MISSILE_HELP2MAN help2man)
if(MISSILE_HELP2MAN)
  set(MISSILE_MAN_PAGES)
  function(missile_man_page tool section summary)
    set(page "${PROJECT_BINARY_DIR}/man/${tool}.${section}")
    set(env)
    if(tool STREQUAL "missile-calibrate")
      set(env "LD_LIBRARY_PATH=$<TARGET_FILE_DIR:fakecuda>")
    endif()
    add_custom_command(
      OUTPUT "${page}.gz"
      COMMAND ${CMAKE_COMMAND} -E make_directory "${PROJECT_BINARY_DIR}/man"
      COMMAND ${CMAKE_COMMAND} -E env ${env} ${MISSILE_HELP2MAN} --no-info --no-discard-stderr
              --section=${section} --name=${summary} --output=${page} $<TARGET_FILE:${tool}>
      COMMAND gzip -9nf "${page}"
      DEPENDS ${tool}
      COMMENT "help2man ${tool}"
      VERBATIM)
    install(FILES "${page}.gz" DESTINATION ${CMAKE_INSTALL_MANDIR}/man${section})
    set(MISSILE_MAN_PAGES ${MISSILE_MAN_PAGES} "${page}.gz" PARENT_SCOPE)
  endfunction()
  missile_man_page(missiled 8
                   "the Missile node daemon: GPU memory quotas, PCIe copy scheduling, BE pacing")
  missile_man_page(missilectl 1 "administer missiled: status, tenants, policy")
  missile_man_page(missile-run 1 "run a program as a Missile tenant under the shim")
  if(TARGET missile-webhook)
    missile_man_page(missile-webhook 8
                     "Kubernetes admission webhook that makes annotated pods Missile tenants")
  endif()
  if(TARGET missile-calibrate AND TARGET fakecuda)
    missile_man_page(missile-calibrate 1
                     "measure a GPU's VRAM channels and write its colour profile")
  endif()
  add_custom_target(missile_man ALL DEPENDS ${MISSILE_MAN_PAGES})
else()
  message(WARNING "help2man not found: no man pages (scripts/install-deps.sh installs it)")
endif()

install(FILES README.md docs/operations.md docs/architecture.md docs/interception.md
              docs/pacing.md docs/results.md deploy/missiled.toml
        DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(FILES LICENSE DESTINATION ${CMAKE_INSTALL_DOCDIR} RENAME copyright)
