// The build's absolute paths (a test's binaries, the source tree), as C strings defined in a small
// generated file per target (cmake/TesseraBuildPaths.cmake), not as string literals on every
// compiler command line: with the paths out of the command line, a second worktree or a fresh
// clone elsewhere compiles every other file to the same command and hits the compiler cache.
//
//   tessera_build_paths(tessera_cli_test TESSERA_BINARY $<TARGET_FILE:tessera>)
//   // in a test:  RunCommand(std::string(TESSERA_BINARY) + " --help");
//
// Each macro a target is given (-DTESSERA_BINARY=tessera_binary_path) names one of these arrays;
// this header is part of that target's precompiled header, so every file of it sees them. It is
// found by its name on the include path (cmake/include/), so the text of that precompiled header
// is the same in every checkout.
#pragma once

extern const char tessera_source_dir_path[];
extern const char tessera_binary_path[];
extern const char tessera_cli_path[];
extern const char tessera_fake_nvml_path_path[];
extern const char tessera_fake_cuda_dir_path[];
extern const char tessera_fake_cuda_library_path[];
extern const char tessera_shim_probe_path[];
extern const char tessera_shim_library_path[];
extern const char tessera_cudart_probe_path[];
extern const char tessera_nvml_probe_path[];
extern const char tessera_fake_mps_control_path[];
extern const char tessera_faketime_library_path[];
