/* nr_elems.p4 -- unrolling over the NR_ELEMS payload elements.
 *
 * P4_16 has no loops, so per-element work is written once as a macro X(i) and expanded
 * here for i = 0 .. NR_ELEMS-1.  Supported sizes: 16, 32, 64. */

#ifndef NR_ELEMS_P4
#define NR_ELEMS_P4

#define NR_FOR_ELEMS_0_15(X) \
    X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) \
    X(8) X(9) X(10) X(11) X(12) X(13) X(14) X(15)
#define NR_FOR_ELEMS_16_31(X) \
    X(16) X(17) X(18) X(19) X(20) X(21) X(22) X(23) \
    X(24) X(25) X(26) X(27) X(28) X(29) X(30) X(31)
#define NR_FOR_ELEMS_32_63(X) \
    X(32) X(33) X(34) X(35) X(36) X(37) X(38) X(39) \
    X(40) X(41) X(42) X(43) X(44) X(45) X(46) X(47) \
    X(48) X(49) X(50) X(51) X(52) X(53) X(54) X(55) \
    X(56) X(57) X(58) X(59) X(60) X(61) X(62) X(63)

#if NR_ELEMS == 16
#define NR_FOR_EACH_ELEM(X) NR_FOR_ELEMS_0_15(X)
#elif NR_ELEMS == 32
#define NR_FOR_EACH_ELEM(X) NR_FOR_ELEMS_0_15(X) NR_FOR_ELEMS_16_31(X)
#elif NR_ELEMS == 64
#define NR_FOR_EACH_ELEM(X) NR_FOR_ELEMS_0_15(X) NR_FOR_ELEMS_16_31(X) NR_FOR_ELEMS_32_63(X)
#else
#error "NR_ELEMS must be 16, 32 or 64"
#endif

#endif  /* NR_ELEMS_P4 */
