// memscale-plan: where each feature registers its command-line options.
//
// One function per group, each defined in its own options_<group>.cpp; args.cpp calls them
// in the order below, which is also the order of the sections in --help. To add an option:
// register it in your group's file with add_value / add_flag (they keep the behaviour
// uniform: callbacks run in command-line order, so the last occurrence wins, and values
// reach your handler as typed, so its error can quote them). Put the group's settings in
// its struct in args.hpp.
//
// How a group combines with the others (checked after parsing, args.cpp): options in the
// `commands` group choose what the program does and exclude each other and every run
// option; `output` options go with anything; every other group describes the run.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "args.hpp"

namespace CLI {
class App;
class Option;
}  // namespace CLI

namespace memscale_plan {

// Section titles in --help; also how args.cpp classifies an option.
namespace group {
inline constexpr std::string_view run = "run options";
inline constexpr std::string_view lora = "adapters (LoRA / QLoRA)";
inline constexpr std::string_view gpu = "GPU plan";
inline constexpr std::string_view config = "model from a config.json";
inline constexpr std::string_view cluster = "multi-GPU";
inline constexpr std::string_view vision = "vision models";
inline constexpr std::string_view inference = "inference";
inline constexpr std::string_view output = "output";
inline constexpr std::string_view commands = "commands";
}  // namespace group

// An option with one value: `--name VALUE` or `--name=VALUE`. `handle` gets the value as
// typed and throws usage_error (or memscale::error) naming `name` when it is invalid.
CLI::Option* add_value(CLI::App& app, std::string_view group, const std::string& name, const std::string& placeholder,
                       const std::string& help, std::function<void(const std::string&)> handle);

// A flag without a value.
CLI::Option* add_flag(CLI::App& app, std::string_view group, const std::string& name, const std::string& help,
                      std::function<void()> handle);

// The groups, in --help order.
void add_config_options(CLI::App& app, options& o);     // options_config.cpp
void apply_config_quantization(options& o);             // options_config.cpp: after parsing
void add_run_options(CLI::App& app, options& o);        // options_run.cpp
void add_lora_options(CLI::App& app, options& o);       // options_lora.cpp
void add_gpu_options(CLI::App& app, options& o);        // options_gpu.cpp
void add_cluster_options(CLI::App& app, options& o);    // options_cluster.cpp
void add_vision_options(CLI::App& app, options& o);     // options_vision.cpp
void add_inference_options(CLI::App& app, options& o);  // options_inference.cpp
void check_inference_options(const options& o);         // options_inference.cpp: after parsing
void add_output_options(CLI::App& app, options& o);     // options_output.cpp
void add_command_options(CLI::App& app, options& o);    // options_commands.cpp

// Sets the offload flags of a comma-separated list (optimizer, parameters, activations);
// errors name `field` (options_run.cpp).
void set_offload(options& o, std::string_view list, const std::string& field);

// "SIZE" as bytes: a number with a unit, 24GiB, 80GB, 23.5GiB, 512MiB (binary for ...iB,
// decimal for ...B); errors name `field` (options_gpu.cpp).
std::uint64_t parse_size(std::string_view text, const std::string& field);

// "\"text\"": how messages quote a value as typed.
std::string in_quotes(std::string_view text);

// How messages quote a file path: a long one keeps its end, the file name.
std::string path_in_quotes(std::string_view path);

}  // namespace memscale_plan
