/* Parses PowerShell files with tree-sitter-powershell and reports every syntax error.
 * Usage: ps_parse FILE...   Exit 0 when every file parses cleanly, 1 otherwise.
 * Built by tests/integration/test_setup.py against the npm packages in this folder
 * (tree-sitter's C core and the grammar's parser.c / scanner.c). A grammar is not PowerShell's
 * own parser: it catches unbalanced braces, broken strings and here-strings, bad pipelines and
 * statements, not every semantic rule ([System.Management.Automation.Language.Parser] does). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tree_sitter/api.h>

const TSLanguage *tree_sitter_powershell(void);

static char *read_all(const char *path, long *size) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  *size = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *text = malloc((size_t)*size + 1);
  if (text && fread(text, 1, (size_t)*size, f) != (size_t)*size) {
    free(text);
    text = NULL;
  }
  fclose(f);
  if (text) text[*size] = 0;
  return text;
}

/* Prints the ERROR and MISSING nodes under `node`; returns how many. */
static int report(const char *path, TSNode node) {
  int found = 0;
  if (ts_node_is_error(node) || ts_node_is_missing(node)) {
    TSPoint at = ts_node_start_point(node);
    fprintf(stderr, "%s:%u:%u: %s %s\n", path, at.row + 1, at.column + 1,
            ts_node_is_missing(node) ? "missing" : "syntax error at", ts_node_type(node));
    return 1;
  }
  if (!ts_node_has_error(node)) return 0;
  for (uint32_t i = 0; i < ts_node_child_count(node); ++i) found += report(path, ts_node_child(node, i));
  return found;
}

int main(int argc, char **argv) {
  TSParser *parser = ts_parser_new();
  if (!ts_parser_set_language(parser, tree_sitter_powershell())) {
    fprintf(stderr, "ps_parse: the grammar's ABI does not match this tree-sitter core\n");
    return 2;
  }
  int bad = 0;
  for (int i = 1; i < argc; ++i) {
    long size = 0;
    char *text = read_all(argv[i], &size);
    if (!text) {
      fprintf(stderr, "%s: cannot read\n", argv[i]);
      bad = 1;
      continue;
    }
    TSTree *tree = ts_parser_parse_string(parser, NULL, text, (uint32_t)size);
    if (report(argv[i], ts_tree_root_node(tree))) bad = 1;
    ts_tree_delete(tree);
    free(text);
  }
  ts_parser_delete(parser);
  return bad;
}
