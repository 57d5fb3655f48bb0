# tessera_grpc_library(): C++ for .proto files (messages and gRPC services), generated at build
# time with protoc and grpc_cpp_plugin (Debian 12: protobuf-compiler, protobuf-compiler-grpc,
# libgrpc++-dev, libprotobuf-dev; scripts/setup installs them).
#
#   tessera_grpc_library(tessera_k8s_proto
#     ROOT src/integrations/k8s/proto
#     PROTOS dra/v1/api.proto pluginregistration/v1/api.proto)
#
# runs protoc -I ROOT over each file into <build>/generated/<target>/ (dra/v1/api.pb.h,
# dra/v1/api.grpc.pb.h, ...) and makes the static library TARGET of the generated sources, which
# a module links PRIVATE and includes as "dra/v1/api.grpc.pb.h". Generated code is compiled
# without the house warnings or -Werror (it is not ours to fix), position-independent like the
# modules; the library links gRPC::grpc++ and protobuf::libprotobuf for its users.
find_package(Protobuf REQUIRED)
find_package(gRPC CONFIG REQUIRED)
find_program(TESSERA_GRPC_CPP_PLUGIN grpc_cpp_plugin REQUIRED)

function(tessera_grpc_library target)
  cmake_parse_arguments(P "" "ROOT" "PROTOS" ${ARGN})
  get_filename_component(root "${P_ROOT}" ABSOLUTE BASE_DIR ${PROJECT_SOURCE_DIR})
  set(out ${CMAKE_BINARY_DIR}/generated/${target})
  set(generated "")
  foreach(proto IN LISTS P_PROTOS)
    string(REGEX REPLACE "\\.proto$" "" stem "${proto}")
    set(files ${out}/${stem}.pb.cc ${out}/${stem}.pb.h ${out}/${stem}.grpc.pb.cc ${out}/${stem}.grpc.pb.h)
    add_custom_command(
      OUTPUT ${files}
      COMMAND ${CMAKE_COMMAND} -E make_directory ${out}
      COMMAND protobuf::protoc -I ${root} --cpp_out=${out} --grpc_out=${out}
              --plugin=protoc-gen-grpc=${TESSERA_GRPC_CPP_PLUGIN} ${root}/${proto}
      DEPENDS ${root}/${proto} protobuf::protoc
      COMMENT "tessera: protoc ${proto}"
      VERBATIM)
    list(APPEND generated ${out}/${stem}.pb.cc ${out}/${stem}.grpc.pb.cc)
  endforeach()
  add_library(${target} STATIC ${generated})
  target_include_directories(${target} SYSTEM PUBLIC ${out})
  target_link_libraries(${target} PUBLIC gRPC::grpc++ protobuf::libprotobuf)
  set_target_properties(${target} PROPERTIES POSITION_INDEPENDENT_CODE ON)
  target_compile_options(${target} PRIVATE -w)
endfunction()
