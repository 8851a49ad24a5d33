# The lazy forwarder for driver entry points the shim does not hook.
#
# A trampoline (trampolines.S) jumps here with the entry's index in r11 while the caller's
# arguments are still in registers and on the stack. Save every argument register (integer and
# vector, and rax, the vector-register count of variadic calls), ask missile_resolve_forward for
# the real function (which also patches the entry table so the next call jumps there directly),
# restore and tail-jump with the stack exactly as the caller left it.
#if !defined(__x86_64__)
#error libmissile's forwarder is written for x86-64
#endif
        .text
        .hidden missile_forward_slow
        .hidden missile_resolve_forward
        .globl  missile_forward_slow
        .type   missile_forward_slow, @function
        .p2align 4
missile_forward_slow:
        .cfi_startproc
        pushq   %rbp
        .cfi_def_cfa_offset 16
        .cfi_offset %rbp, -16
        movq    %rsp, %rbp
        .cfi_def_cfa_register %rbp
        pushq   %rdi
        pushq   %rsi
        pushq   %rdx
        pushq   %rcx
        pushq   %r8
        pushq   %r9
        pushq   %rax
        subq    $136, %rsp              # 8 vector registers + 8 bytes keep rsp 16-byte aligned
        movdqu  %xmm0, 0(%rsp)
        movdqu  %xmm1, 16(%rsp)
        movdqu  %xmm2, 32(%rsp)
        movdqu  %xmm3, 48(%rsp)
        movdqu  %xmm4, 64(%rsp)
        movdqu  %xmm5, 80(%rsp)
        movdqu  %xmm6, 96(%rsp)
        movdqu  %xmm7, 112(%rsp)
        movl    %r11d, %edi
        call    missile_resolve_forward
        movq    %rax, %r11
        movdqu  0(%rsp), %xmm0
        movdqu  16(%rsp), %xmm1
        movdqu  32(%rsp), %xmm2
        movdqu  48(%rsp), %xmm3
        movdqu  64(%rsp), %xmm4
        movdqu  80(%rsp), %xmm5
        movdqu  96(%rsp), %xmm6
        movdqu  112(%rsp), %xmm7
        addq    $136, %rsp
        popq    %rax
        popq    %r9
        popq    %r8
        popq    %rcx
        popq    %rdx
        popq    %rsi
        popq    %rdi
        popq    %rbp
        .cfi_def_cfa %rsp, 8
        jmpq    *%r11
        .cfi_endproc
        .size   missile_forward_slow, .-missile_forward_slow
        .section .note.GNU-stack,"",@progbits
