"""build_view.fold_build: a kernel's source as one build sees it."""
from course_lib.core.build_view import fold_build

SOURCE = """\
#if MODE
a_mode();
#else
b_plain();
#endif
#if __CUDA_ARCH__ >= 900
hopper();
#endif
    if (MODE && gridDim.y > 1) {
        split();
    }
    if (n > 1 && MODE == 0) {
        kept_unknown_first();
    }
    if (MODE) {
        left();
    } else {
        right();
    }
    if (EPI == 2) add_residual();
    if (ready) go();"""


def test_decided_branches_are_folded_and_undecided_ones_kept():
    out = fold_build(SOURCE, {"MODE": 0, "EPI": 1})
    assert "a_mode" not in out and "b_plain();" in out and "#else" not in out
    assert "#if __CUDA_ARCH__ >= 900\nhopper();\n#endif" in out     # __CUDA_ARCH__ is not the build's to decide
    assert "split" not in out                                      # a known-false && term
    assert "kept_unknown_first" in out                            # MODE == 0 is true, n > 1 unknown
    assert "left();" in out and "right();" in out                 # an if with an else is kept whole
    assert "add_residual" not in out and "if (ready) go();" in out


def test_the_other_build_keeps_the_other_branches():
    out = fold_build(SOURCE, {"MODE": 1, "EPI": 2})
    assert "a_mode();" in out and "b_plain" not in out
    assert "split();" in out and "add_residual" in out


def test_notebook_06_prints_its_own_build_of_the_bf16_kernel():
    from course_lib.labs import gemm_ladder

    text = gemm_ladder.step_source("bf16_gemm_mma")
    assert "mma_bf16" in text and "cp_async" in text              # the kernel 06 teaches
    for other in ("stmatrix_x4", "slab blockIdx.y", "res2[j] = rrow", "#if TC_", "bias", "residual", "epilogue"):
        assert other not in text, other                           # 07's and 08's paths


def test_what_it_cannot_decide_it_leaves_as_written():
    src = """\
#if M
a();
#elif N
b();
#else
c();
#endif
#if !M
#ifdef X
inside();
#endif
#endif
#if(M)
p();
#endif
#if M & 2
q();
#endif
    if (M && a || b) {
        r();
    }"""
    out = fold_build(src, {"M": 1, "N": 0})
    assert "#elif N" in out and "a();" in out and "b();" in out and "c();" in out   # a chain with #elif: kept
    assert "inside" not in out and "#ifdef X" not in out                        # nested in a dropped branch
    assert "p();" in out and "#if(M)" not in out                                # #if( without a space, decided
    assert "#if M & 2\nq();\n#endif" in out                                     # a bitwise &: C's precedence
    assert "r();" in out                                                        # (M && a) || b may be true


def test_a_list_whose_tail_is_folded_away_closes_on_its_last_line():
    src = """\
void body(int a, int pid
#if EPI
          , const float* bias
#endif
          ) {
    call(a, pid
#if EPI
         , bias
#endif
         );
    other(a, // why
#if EPI
          bias
#endif
          );"""
    plain = fold_build(src, {"EPI": 0})
    assert "void body(int a, int pid) {" in plain and "call(a, pid);" in plain
    assert "other(a, // why\n          );" in plain                     # never into a comment
    fused = fold_build(src, {"EPI": 1})
    assert ", const float* bias) {" in fused and ", bias);" in fused
