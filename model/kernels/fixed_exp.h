/* The constants of the model's exponential (model/fixed_exp.py), as hexadecimal literals: exactly
   the float64 values of fixed_exp.py's EXP_MIN, EXP_MAX, LOG2E, LN2_HI, LN2_LO and POLY
   (tests/test_model_q8kernel.py holds the two files to the same values). */
#ifndef RADIXCHECK_FIXED_EXP_H
#define RADIXCHECK_FIXED_EXP_H

#define EXP_MIN (-0x1.6200000000000p+9)
#define EXP_MAX (0x1.6280000000000p+9)
#define EXP_LOG2E (0x1.71547652b82fep+0)
#define EXP_LN2_HI (0x1.62e42fee00000p-1)
#define EXP_LN2_LO (0x1.a39ef35793c76p-33)
#define EXP_DEGREE 12
static const double EXP_POLY[EXP_DEGREE + 1] = {
    0x1.0000000000000p+0, 0x1.0000000000000p+0, 0x1.0000000000000p-1, 0x1.5555555555555p-3,
    0x1.5555555555555p-5, 0x1.1111111111111p-7, 0x1.6c16c16c16c17p-10, 0x1.a01a01a01a01ap-13,
    0x1.a01a01a01a01ap-16, 0x1.71de3a556c734p-19, 0x1.27e4fb7789f5cp-22, 0x1.ae64567f544e4p-26,
    0x1.1eed8eff8d898p-29,
};

#endif
