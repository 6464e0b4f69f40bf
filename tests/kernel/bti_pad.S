// SPDX-License-Identifier: MIT
// Ends bti_target's traced section on a page boundary (linked after
// bti_target.c, whose first traced function starts it on one): the pages
// it guards with PROT_BTI then hold nothing built without landing pads.
        .section ftjit_bti_text,"ax",%progbits
        .balign 4096
        .section .note.GNU-stack,"",%progbits
