# Install rules: the libraries, the headers, the tcuda program, a CMake
# package (find_package(tcuda) gives tcuda::tcuda and tcuda::tcuda_static)
# and a pkg-config file.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

install(TARGETS tcuda tcuda_static EXPORT tcudaTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(TARGETS tcuda_tool RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/tcuda DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT tcudaTargets NAMESPACE tcuda:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/tcuda)

configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/tcudaConfig.cmake.in
  ${PROJECT_BINARY_DIR}/tcudaConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/tcuda)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/tcudaConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/tcudaConfig.cmake ${PROJECT_BINARY_DIR}/tcudaConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/tcuda)

set(TCUDA_PC_PRIVATE_LIBS "-lpthread -ldl -lm")
if(TCUDA_HAVE_CUDA)
  set(TCUDA_PC_PRIVATE_LIBS "-L${CUDAToolkit_LIBRARY_DIR} -lcudart_static -lrt ${TCUDA_PC_PRIVATE_LIBS} -lstdc++")
endif()
configure_file(${PROJECT_SOURCE_DIR}/cmake/tcuda.pc.in ${PROJECT_BINARY_DIR}/tcuda.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/tcuda.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
