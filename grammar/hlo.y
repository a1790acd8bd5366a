/* hlo.y - bison grammar for XLA HLO text (see docs/hlo-input notes).
 *
 * Builds the AST of src/ast.h and nothing else: no name resolution, no
 * attribute interpretation, no semantic checks (src/parse.c lowers the tree).
 * Every action is one call to an ast_* constructor.  Finished pieces (the
 * header, a computation head, each instruction, a computation end) are handed
 * to the ParseCtx's sink as they are reduced, and their nodes are then freed,
 * so memory stays bounded by one instruction; no AST pointer is kept on the
 * parser stack across a hand-over.  Attribute values are generic token trees
 * (see ast.h); the only things the grammar knows are the module / computation
 * / instruction skeleton and shapes.
 *
 * Pure parser: no globals; the scanner and the ParseCtx are parameters.
 * Syntax errors read `m.hlo:3:14: error: unexpected ')', expected identifier
 * or '('` (parse.error custom + LAC: the expected list is exact).  LAC
 * checks the lookahead before every reduction; the build also makes a copy
 * of this parser without it (prefix hlo_fast_yy, CMakeLists.txt), which
 * parse.c runs first, with a scanner that hands it each well-formed array
 * shape as one SHAPE token (lowered already) and each plain `attr={1,0}`
 * list as one INTGROUP token (this parser never sees either):
 * on input without a diagnostic both build the same tree, and on any
 * diagnostic parse.c starts over with this one.  After an
 * error inside a computation body the parser skips to the next instruction
 * (`insts: insts error`); bison stays quiet until three tokens were shifted,
 * so one mistake gives one message.
 *
 * Conflicts: none (%expect 0).  Top-level attribute values may be several
 * juxtaposed prims (`replica_groups=[2,2]<=[4]T(1,0)`), but only prims that
 * cannot start an instruction or a computation (no bare words or %names)
 * may follow the first one, which keeps `attr=x` `next = ...` unambiguous.
 */
%require "3.6"
%define api.pure full
%define api.prefix {hlo_yy}
%define api.token.prefix {TOK_}
%define api.location.type {AstLoc}
%define parse.error custom
%define parse.lac full
%locations
%param {void *scanner}
%parse-param {ParseCtx *cx}
%expect 0

%code requires {
#include "ast.h"
}

%code {
/* The build makes a second parser from this grammar with another prefix and
 * without LAC (parse.c); both read the one scanner and report through the
 * one yyerror. */
#undef yylex
#ifdef SPMDC_FAST_PARSER
#define yylex ast_feed_lex /* the scanner's tokens through a ScanFeed (ast.h) */
#else
#define yylex ast_lac_lex /* hlo_yylex, with the rest of a bad line dropped */
#endif
#undef yyerror
#define yyerror hlo_yyerror
int hlo_yylex(AstSemVal *lval, AstLoc *lloc, void *scanner);
#define YYLLOC_DEFAULT(Cur, Rhs, N)                                          \
    do {                                                                     \
        if (N == 1) (Cur) = YYRHSLOC(Rhs, 1);                                \
        else if (N) (Cur) = ast_loc_join(&YYRHSLOC(Rhs, 1), &YYRHSLOC(Rhs, N)); \
        else (Cur) = ast_loc_empty(&YYRHSLOC(Rhs, 0));                       \
    } while (0)
}

%define api.value.type {AstSemVal}

%token <tok> NAME_PCT "%name"
%token <tok> LABEL "label (name:)"
%token <tok> ATTRNAME "attribute name"
%token <tok> PRIMTYPE "element type"
%token <tok> TYPE_AS_NAME "element type followed by '='"
%token <tok> IDENT "identifier"
%token <tok> INT "integer"
%token <tok> DECIMAL "number"
%token <tok> NAN "'nan'"
%token <tok> NEGINF "'-inf'"
%token <tok> STRING "string"
%token <tok> BLOB "'{...}' text"
%token <tok> DXD "size (AxB)"
%token <tok> PAD "padding (lo_hi)"
%token <tok> DIMLABELS "dim labels"
%token <tok> SHAPE "array shape"
%token <tok> INTGROUP "integer list"
%token <tok> INST "instruction head"
%token <tok> SHARDING "sharding seen before"
%token <tok> SHARDING_LEAF "sharding leaf seen before"
%token <tok> SIGNATURE "parameter list"
%token <tok> KW_HLOMODULE "'HloModule'"
%token <tok> KW_ENTRY "'ENTRY'"
%token <tok> KW_ROOT "'ROOT'"
%token <tok> KW_TRUE "'true'"
%token <tok> KW_FALSE "'false'"
%token <tok> KW_INF "'inf'"
%token <tok> KW_MAXIMAL "'maximal'"
%token <tok> KW_REPLICATED "'replicated'"
%token <tok> KW_MANUAL "'manual'"
%token <tok> KW_UNKNOWN "'unknown'"
%token <tok> KW_UNREDUCED "'unreduced'"
%token <tok> KW_LAST_TILE_DIM_REPLICATE "'last_tile_dim_replicate'"
%token <tok> KW_SHARD_AS "'shard_as'"
%token <tok> KW_SHARD_LIKE "'shard_like'"
%token LE "'<='"
%token ARROW "'->'"
%token ELLIPSIS "'...'"
%token TPAREN "'T('"
%token LAYOUT_LBRACE "layout"
%token SECTION "stack frame section"

%type <tok> name
%type <flag> opt_entry opt_root
%type <val> prim cont group attr operands
%type <list> elems1 header_attrs inst_attrs inst_attrs1 comp_attrs dims1 ints1
%type <shape> shape array_shape tuple_shape
%type <shapes> shapes shapes1
%type <layout> opt_layout
%type <inst> inst
%type <params> params params1

%%

module
    : comps
    | header sections comps
    ;

/* The stack frame index newer XLA prints after the header (FileNames,
 * FunctionNames, FileLocations, StackFrames): `N "text"` or `N {k=v ...}`
 * lines.  Accepted and dropped. */
sections
    : %empty
    | sections SECTION section_entries
    ;

section_entries
    : %empty
    | section_entries INT prim              {}
    ;

header
    : KW_HLOMODULE name header_attrs        { ast_header(cx, $2, &@2, $3); }
    ;

header_attrs
    : %empty                                { $$ = (AstList){0}; }
    | header_attrs ',' attr                 { $$ = ast_list_add($1, $3); }
    ;

comps
    : %empty
    | comps comp
    ;

comp
    : comp_head '{' insts '}' comp_attrs    { ast_comp_end(cx, &@4, $5); }
    ;

comp_head
    : opt_entry name
        { ast_comp_begin(cx, $1, &@1, $2, &@2, false, (AstParamList){0}, NULL); }
    | opt_entry name '(' params ')' ARROW shape
        { ast_comp_begin(cx, $1, &@1, $2, &@2, true, $4, $7); }
    | opt_entry name SIGNATURE ARROW shape
        { ast_comp_begin_sig(cx, $1, &@1, $2, &@2, $3, &@3, $5); }
    ;

opt_entry
    : %empty                                { $$ = false; }
    | KW_ENTRY                              { $$ = true; }
    ;

name
    : IDENT
    | NAME_PCT
    ;

params
    : %empty                                { $$ = (AstParamList){0}; }
    | params1
    ;

params1
    : LABEL shape                           { $$ = ast_param_add(cx, (AstParamList){0}, $1, $2, &@1); }
    | params1 ',' LABEL shape               { $$ = ast_param_add(cx, $1, $3, $4, &@3); }
    ;

comp_attrs
    : %empty                                { $$ = (AstList){0}; }
    | comp_attrs ',' attr                   { $$ = ast_list_add($1, $3); }
    ;

insts
    : %empty
    | insts inst                            { if ($2) ast_inst_done(cx, $2); }
    | insts error
    ;

/* An element type where the name goes (`s1 = f32[17] ...`, rejected by
 * XLA's parser too) is one error; the rest of the instruction still parses,
 * so no second error cascades from it.  The hot rules below spell out
 * their alternatives (no shape / array / tuple shape; empty or not) rather
 * than going through unit and empty rules: every reduction saved is saved
 * for each of a module's instructions. */
inst
    : opt_root name '=' IDENT operands inst_attrs
        { $$ = ast_inst(cx, $1, &@1, $2, &@2, NULL, $4, &@4, $5, $6, $1 ? &@1 : &@2, &@$); }
    | opt_root name '=' array_shape IDENT operands inst_attrs
        { $$ = ast_inst(cx, $1, &@1, $2, &@2, $4, $5, &@5, $6, $7, $1 ? &@1 : &@2, &@$); }
    | opt_root name '=' tuple_shape IDENT operands inst_attrs
        { $$ = ast_inst(cx, $1, &@1, $2, &@2, $4, $5, &@5, $6, $7, $1 ? &@1 : &@2, &@$); }
    | INST
        { AstLoc r = ast_loc_empty(&@0); $$ = ast_inst_head(cx, false, &r, $1, &@1, (AstList){0}, &@1); }
    | INST inst_attrs1
        { AstLoc r = ast_loc_empty(&@0); $$ = ast_inst_head(cx, false, &r, $1, &@1, $2, &@$); }
    | KW_ROOT INST
        { $$ = ast_inst_head(cx, true, &@1, $2, &@2, (AstList){0}, &@$); }
    | KW_ROOT INST inst_attrs1
        { $$ = ast_inst_head(cx, true, &@1, $2, &@2, $3, &@$); }
    | opt_root TYPE_AS_NAME '=' opt_shape IDENT operands inst_attrs
        { (void)$2; ast_bad_inst_name(cx, &@2); $$ = NULL; }
    ;

opt_root
    : %empty                                { $$ = false; }
    | KW_ROOT                               { $$ = true; }
    ;

opt_shape
    : %empty
    | shape                                 { (void)$1; }
    ;

operands
    : '(' ')'                               { $$ = ast_group(cx, AV_PAREN, (AstList){0}, &@$); }
    | '(' elems1 ')'                        { $$ = ast_group(cx, AV_PAREN, $2, &@$); }
    ;

inst_attrs
    : %empty                                { $$ = (AstList){0}; }
    | inst_attrs ',' attr                   { $$ = ast_list_add($1, $3); }
    ;

/* After an INST: no empty rules (two reductions fewer per instruction). */
inst_attrs1
    : ',' attr                              { $$ = ast_list1($2); }
    | inst_attrs1 ',' attr                  { $$ = ast_list_add($1, $3); }
    ;

/* ---------------------------------------------------------------- shapes */

shape
    : array_shape
    | tuple_shape
    ;

tuple_shape
    : '(' shapes ')'                        { $$ = ast_tuple_shape(cx, $2, &@$); }
    ;

shapes
    : %empty                                { $$ = (AstShapeList){0}; }
    | shapes1
    ;

shapes1
    : shape                                 { $$ = ast_shape_list_add((AstShapeList){0}, $1); }
    | shapes1 ',' shape                     { $$ = ast_shape_list_add($1, $3); }
    ;

array_shape
    : PRIMTYPE '[' ']' opt_layout           { $$ = ast_array_shape(cx, $1, (AstList){0}, $4, &@$); }
    | PRIMTYPE '[' dims1 ']' opt_layout     { $$ = ast_array_shape(cx, $1, $3, $5, &@$); }
    | SHAPE                                 { $$ = ast_pre_shape(cx, $1, &@1); }
    ;

/* Dims: `N`, `<=N` (bounded) or `?` (unbounded). */
dims1
    : INT                                   { $$ = ast_list1(ast_dim(cx, $1, 0, &@1)); }
    | LE INT                                { $$ = ast_list1(ast_dim(cx, $2, AVF_BOUNDED, &@$)); }
    | '?'                                   { $$ = ast_list1(ast_dim(cx, (AstTok){0}, AVF_UNBOUNDED, &@1)); }
    | dims1 ',' INT                         { $$ = ast_list_add($1, ast_dim(cx, $3, 0, &@3)); }
    | dims1 ',' LE INT                      { AstLoc l = ast_loc_join(&@3, &@4);
                                              $$ = ast_list_add($1, ast_dim(cx, $4, AVF_BOUNDED, &l)); }
    | dims1 ',' '?'                         { $$ = ast_list_add($1, ast_dim(cx, (AstTok){0}, AVF_UNBOUNDED, &@3)); }
    ;

opt_layout
    : %empty                                { $$ = NULL; }
    | LAYOUT_LBRACE '}'                     { $$ = ast_layout(cx, (AstList){0}, NULL, &@$); }
    | LAYOUT_LBRACE ints1 '}'               { $$ = ast_layout(cx, $2, NULL, &@$); }
    | LAYOUT_LBRACE ':' tail '}'            { AstLoc t = ast_loc_between(&@2, &@4); $$ = ast_layout(cx, (AstList){0}, &t, &@$); }
    | LAYOUT_LBRACE ints1 ':' tail '}'      { AstLoc t = ast_loc_between(&@3, &@5); $$ = ast_layout(cx, $2, &t, &@$); }
    ;

ints1
    : INT                                   { $$ = ast_list1(ast_dim(cx, $1, 0, &@1)); }
    | ints1 ',' INT                         { $$ = ast_list_add($1, ast_dim(cx, $3, 0, &@3)); }
    ;

/* Layout tails (tiling, memory space, ...) are kept as text: any balanced tokens. */
tail
    : %empty
    | tail tail_tok
    ;

tail_tok
    : IDENT {} | KW_TRUE {} | KW_FALSE {} | KW_INF {} | KW_MAXIMAL {} | KW_REPLICATED {} | KW_MANUAL {}
    | KW_UNKNOWN {} | KW_UNREDUCED {} | KW_LAST_TILE_DIM_REPLICATE {} | KW_SHARD_AS {} | KW_SHARD_LIKE {}
    | INT {} | PRIMTYPE {} | ',' | ':' | '*' | '#' | '+' | '~' | '[' | ']' | '?'
    | '(' tail ')'
    | TPAREN tail ')'
    | '{' tail '}'
    | LAYOUT_LBRACE tail '}'
    ;

/* ---------------------------------------------------------------- attribute values */

/* `name=value`: the first prim, then only prims that cannot start an
 * instruction (cont). */
attr
    : ATTRNAME prim                         { $$ = ast_attr(cx, $1, $2, &@$); }
    | SHARDING                              { $$ = ast_sharding_attr(cx, $1, &@1); }
    | attr cont                             { $$ = ast_attr_add($1, $2); }
    ;

/* Every cont, spelled out again (no unit reduction per prim), and the
 * prims that may start an instruction. */
prim
    : INT                                   { $$ = ast_tok_val(cx, AV_INT, $1, &@1); }
    | DECIMAL                               { $$ = ast_tok_val(cx, AV_DECIMAL, $1, &@1); }
    | NAN                                   { $$ = ast_tok_val(cx, AV_NAN, $1, &@1); }
    | NEGINF                                { $$ = ast_tok_val(cx, AV_NEGINF, $1, &@1); }
    | STRING                                { $$ = ast_tok_val(cx, AV_STRING, $1, &@1); }
    | BLOB                                  { $$ = ast_tok_val(cx, AV_BLOB, $1, &@1); }
    | DXD                                   { $$ = ast_tok_val(cx, AV_DXD, $1, &@1); }
    | PAD                                   { $$ = ast_tok_val(cx, AV_PAD, $1, &@1); }
    | DIMLABELS                             { $$ = ast_tok_val(cx, AV_DIMLABELS, $1, &@1); }
    | LE                                    { $$ = ast_punct(cx, AP_LE, &@1); }
    | ARROW                                 { $$ = ast_punct(cx, AP_ARROW, &@1); }
    | ':'                                   { $$ = ast_punct(cx, AP_COLON, &@1); }
    | '?'                                   { $$ = ast_punct(cx, AP_QUESTION, &@1); }
    | ELLIPSIS                              { $$ = ast_punct(cx, AP_ELLIPSIS, &@1); }
    | '*'                                   { $$ = ast_punct(cx, AP_STAR, &@1); }
    | '#'                                   { $$ = ast_punct(cx, AP_HASH, &@1); }
    | '+'                                   { $$ = ast_punct(cx, AP_PLUS, &@1); }
    | '~'                                   { $$ = ast_punct(cx, AP_TILDE, &@1); }
    | group
    | array_shape                           { $$ = ast_shape_val(cx, $1); }
    | IDENT                                 { $$ = ast_tok_val(cx, AV_WORD, $1, &@1); }
    | KW_TRUE                               { $$ = ast_tok_val(cx, AV_WORD, $1, &@1); }
    | KW_FALSE                              { $$ = ast_tok_val(cx, AV_WORD, $1, &@1); }
    | KW_INF                                { $$ = ast_tok_val(cx, AV_WORD, $1, &@1); }
    | KW_MAXIMAL                            { $$ = ast_tok_val(cx, AV_WORD, $1, &@1); }
    | KW_REPLICATED                         { $$ = ast_tok_val(cx, AV_WORD, $1, &@1); }
    | KW_MANUAL                             { $$ = ast_tok_val(cx, AV_WORD, $1, &@1); }
    | KW_UNKNOWN                            { $$ = ast_tok_val(cx, AV_WORD, $1, &@1); }
    | KW_UNREDUCED                          { $$ = ast_tok_val(cx, AV_WORD, $1, &@1); }
    | KW_LAST_TILE_DIM_REPLICATE            { $$ = ast_tok_val(cx, AV_WORD, $1, &@1); }
    | KW_SHARD_AS                           { $$ = ast_tok_val(cx, AV_WORD, $1, &@1); }
    | KW_SHARD_LIKE                         { $$ = ast_tok_val(cx, AV_WORD, $1, &@1); }
    | NAME_PCT                              { $$ = ast_tok_val(cx, AV_NAME, $1, &@1); }
    | LABEL                                 { $$ = ast_tok_val(cx, AV_LABEL, $1, &@1); }
    | ATTRNAME prim                         { $$ = ast_attr(cx, $1, $2, &@$); }
    | '='                                   { $$ = ast_punct(cx, AP_EQ, &@1); }
    | INTGROUP                              { $$ = ast_int_group(cx, $1, &@1); }
    | SHARDING_LEAF                         { $$ = ast_tok_val(cx, AV_SHARED, $1, &@1); }
    ;

cont
    : INT                                   { $$ = ast_tok_val(cx, AV_INT, $1, &@1); }
    | DECIMAL                               { $$ = ast_tok_val(cx, AV_DECIMAL, $1, &@1); }
    | NAN                                   { $$ = ast_tok_val(cx, AV_NAN, $1, &@1); }
    | NEGINF                                { $$ = ast_tok_val(cx, AV_NEGINF, $1, &@1); }
    | STRING                                { $$ = ast_tok_val(cx, AV_STRING, $1, &@1); }
    | BLOB                                  { $$ = ast_tok_val(cx, AV_BLOB, $1, &@1); }
    | DXD                                   { $$ = ast_tok_val(cx, AV_DXD, $1, &@1); }
    | PAD                                   { $$ = ast_tok_val(cx, AV_PAD, $1, &@1); }
    | DIMLABELS                             { $$ = ast_tok_val(cx, AV_DIMLABELS, $1, &@1); }
    | LE                                    { $$ = ast_punct(cx, AP_LE, &@1); }
    | ARROW                                 { $$ = ast_punct(cx, AP_ARROW, &@1); }
    | ':'                                   { $$ = ast_punct(cx, AP_COLON, &@1); }
    | '?'                                   { $$ = ast_punct(cx, AP_QUESTION, &@1); }
    | ELLIPSIS                              { $$ = ast_punct(cx, AP_ELLIPSIS, &@1); }
    | '*'                                   { $$ = ast_punct(cx, AP_STAR, &@1); }
    | '#'                                   { $$ = ast_punct(cx, AP_HASH, &@1); }
    | '+'                                   { $$ = ast_punct(cx, AP_PLUS, &@1); }
    | '~'                                   { $$ = ast_punct(cx, AP_TILDE, &@1); }
    | group
    | array_shape                           { $$ = ast_shape_val(cx, $1); }
    ;

group
    : '{' '}'                               { $$ = ast_group(cx, AV_BRACE, (AstList){0}, &@$); }
    | '{' elems1 '}'                        { $$ = ast_group(cx, AV_BRACE, $2, &@$); }
    | '[' ']'                               { $$ = ast_group(cx, AV_BRACKET, (AstList){0}, &@$); }
    | '[' elems1 ']'                        { $$ = ast_group(cx, AV_BRACKET, $2, &@$); }
    | '(' ')'                               { $$ = ast_group(cx, AV_PAREN, (AstList){0}, &@$); }
    | '(' elems1 ')'                        { $$ = ast_group(cx, AV_PAREN, $2, &@$); }
    | TPAREN ')'                            { $$ = ast_group(cx, AV_TPAREN, (AstList){0}, &@$); }
    | TPAREN elems1 ')'                     { $$ = ast_group(cx, AV_TPAREN, $2, &@$); }
    ;

/* Comma-separated elements, each one or more juxtaposed prims: the list's
 * tail is the element being read (ast_elem_add extends it). */
elems1
    : prim                                  { $$ = ast_list1(ast_elem1(cx, $1)); }
    | elems1 prim                           { ast_elem_add($1.tail, $2); $$ = $1; }
    | elems1 ',' prim                       { $$ = ast_list_add($1, ast_elem1(cx, $3)); }
    ;

%%

/* Bison's hook for parse.error custom: hands the unexpected token and the
 * (LAC-exact) expected set to ast_syntax_error, which words the message.
 * SHAPE, INTGROUP, INST, SHARDING, SHARDING_LEAF and SIGNATURE are left out: only the parser without
 * LAC reads them, and wherever one may stand an element type, a '{' or a
 * '%name' may too. */
static int yyreport_syntax_error(const yypcontext_t *ctx, void *scanner, ParseCtx *cx)
{
    (void)scanner;
    yysymbol_kind_t expected[YYNTOKENS];
    int n = yypcontext_expected_tokens(ctx, expected, YYNTOKENS), k = 0;
    const char *names[YYNTOKENS];
    for (int i = 0; i < n; i++)
        if (expected[i] != YYSYMBOL_SHAPE && expected[i] != YYSYMBOL_INTGROUP && expected[i] != YYSYMBOL_INST &&
            expected[i] != YYSYMBOL_SHARDING && expected[i] != YYSYMBOL_SHARDING_LEAF &&
            expected[i] != YYSYMBOL_SIGNATURE)
            names[k++] = yysymbol_name(expected[i]);
    n = n < 0 ? n : k;
    yysymbol_kind_t tok = yypcontext_token(ctx);
    ast_syntax_error(cx, yypcontext_location(ctx), tok == YYSYMBOL_YYEOF, yysymbol_name(tok), names,
                     n < 0 ? 0 : n);
    return 0;
}
