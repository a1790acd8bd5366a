/* hlo.y - stub, being written. */
%require "3.6"
%define api.pure full
%define api.prefix {hlo_yy}
%code provides { int hlo_yylex(HLO_YYSTYPE *lval); void hlo_yyerror(const char *msg); }
%token END 0
%%
top: %empty ;
%%
