// A sweep file, {"pert_sweep": 1, "pert_version": ..., "settings": {...}, "cells": [...],
// "grid": [...], "shards": [...]}: reading it (every field's type checked), what makes two cells
// the same cell, the grid its runs asked for and what of it is missing, and the Markdown table
// and CSV made from its cells.
#pragma once
#include <filesystem>
#include <map>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace pert {

constexpr const char* kPlain = "plain";  // --config plain: the model's own config.json

// A config's default row label: its file name without extension ("plain" for the keyword), or
// an inline config's JSON written compactly.
std::string config_stem(const std::string& config);
// What a config is, as 16 hex digits: "plain" for the keyword, an inline config's JSON by its
// value, a file by its content ("missing PATH" when it cannot be read).
std::string config_hash(const std::string& config);
// A model directory's name: "models/rope/" and "./models/rope" are both "rope".
std::string model_name(const std::string& dir);
// Each cell's model as tables show it: its directory's name, or its path where two share one.
std::map<std::string, std::string> model_names(const nlohmann::json& cells);

// A file's content as 16 hex digits (FNV-1a, 64 bits): a changed file is another config or text.
std::string content_hash(const std::filesystem::path& path);
std::string bytes_hash(std::string_view bytes);  // the same of bytes in memory
// The real path where it can be had ("models/rope", "./models/rope/" and its absolute path are one).
std::string real_path(const std::string& path);

// What a model directory holds now, as 16 hex digits: config.json and each *.safetensors file's
// name, size and content (the whole file under 8 MiB, else its first 64 KiB, the header, and 64
// blocks of 64 KiB spread over the rest: retrained or re-converted weights differ in every block,
// and a 14 GB model costs 4 MiB of reads). "missing DIR" when it has none.
std::string model_hash(const std::string& dir);

// Reads and checks a sweep file; throws FormatError naming the file and the field. Cells of
// older files are completed: "config_hash" and "model_hash" from the files as they are now, "label" from
// its file name; settings get their defaults ("dtype": "f32", no --set).
nlohmann::json read_sweep(const std::filesystem::path& path);
nlohmann::json parse_sweep(nlohmann::json sweep, const std::string& where);  // the same, parsed

// The settings a sweep file's results depend on, spelled-out paths replaced by content: the
// text by "text_hash" (computed from "text" when an older file lacks it); without
// "allow_scheme_change", which changes no cell that runs without it.
nlohmann::json comparable_settings(const nlohmann::json& settings);
// An error cell whose model and config were refused as a change of the trained scheme (it has
// no "position": nothing loaded); such cells run again under allow_scheme_change.
bool scheme_refused(const nlohmann::json& cell);

// One cell's identity: the model directory's real path, the config's content and the length,
// so "models/rope" and "/abs/models/rope" are one model, and an edited config is another.
std::string cell_key(const nlohmann::json& cell);
std::string cell_key(const std::string& model, const std::string& config_hash, int length);
// Throws FormatError(where: ...) where cells of one model directory carry different "model_hash"es:
// a sweep resumed or merged after its model was retrained in place would mix two models' cells.
void check_same_weights(const nlohmann::json& cells, const std::string& where);

// The grid: every cell the runs that wrote a file asked for, all shards' included, each
// {"model", "label", "config", "config_hash", "length", "index"}; "shards": the K/N of each run
// ("1/N" ... ; "1/1" unsharded). Files from before grids were recorded have neither.
// `grid` added to the file's (one entry per cell key: the one there first stays).
void add_grid(nlohmann::json& sweep, const nlohmann::json& grid);
// The entries of `grid` with no cell in `cells`.
nlohmann::json missing_cells(const nlohmann::json& grid, const nlohmann::json& cells);
// "rope linear-x2 @512": a cell or grid entry as tables and messages name it.
std::string cell_name(const nlohmann::json& cell);

// Rows grouped by model and config (in order of first appearance), lengths ascending.
void order_cells(nlohmann::json& cells);

// Rows model + config label + the positions actually run, columns the lengths; the cells' `value`
// ("ppl", or "key_ppl" with each cell's key-token count in brackets).
std::string markdown_table(const nlohmann::json& cells, const std::string& value = "ppl");
std::string csv_text(const nlohmann::json& sweep);
// A CSV field, quoted when it holds a comma, a quote or a line break (bench -o csv too).
std::string csv_field(const std::string& s);

}  // namespace pert
