/* nr_elems.p4 -- unrolling over the NR_ELEMS payload elements.
 *
 * P4_16 has no loops, so per-element work is written once as a macro X(i) and expanded
 * here for i = 0 .. NR_ELEMS-1.  NR_ELEMS is a multiple of 4 from 4 to 256: 256 elements
 * (1024 bytes) fill RoCE's 1024-byte path MTU, 252 do so with the 16-byte aggregation tag
 * in the same payload (docs/protocol.md section 8).  The elements come in groups of four,
 * NR_ELEMS_G<k> holding elements 4k .. 4k+3; NR_ELEMS_U<k> is group k when the program has
 * more than 4k elements and empty otherwise, so the expansion is flat (no deep nesting). */

#ifndef NR_ELEMS_P4
#define NR_ELEMS_P4

#if NR_ELEMS < 4 || NR_ELEMS > 256 || NR_ELEMS % 4 != 0
#error "NR_ELEMS must be a multiple of 4 from 4 to 256"
#endif

#define NR_ELEMS_G0(X) X(0) X(1) X(2) X(3)
#define NR_ELEMS_G1(X) X(4) X(5) X(6) X(7)
#define NR_ELEMS_G2(X) X(8) X(9) X(10) X(11)
#define NR_ELEMS_G3(X) X(12) X(13) X(14) X(15)
#define NR_ELEMS_G4(X) X(16) X(17) X(18) X(19)
#define NR_ELEMS_G5(X) X(20) X(21) X(22) X(23)
#define NR_ELEMS_G6(X) X(24) X(25) X(26) X(27)
#define NR_ELEMS_G7(X) X(28) X(29) X(30) X(31)
#define NR_ELEMS_G8(X) X(32) X(33) X(34) X(35)
#define NR_ELEMS_G9(X) X(36) X(37) X(38) X(39)
#define NR_ELEMS_G10(X) X(40) X(41) X(42) X(43)
#define NR_ELEMS_G11(X) X(44) X(45) X(46) X(47)
#define NR_ELEMS_G12(X) X(48) X(49) X(50) X(51)
#define NR_ELEMS_G13(X) X(52) X(53) X(54) X(55)
#define NR_ELEMS_G14(X) X(56) X(57) X(58) X(59)
#define NR_ELEMS_G15(X) X(60) X(61) X(62) X(63)
#define NR_ELEMS_G16(X) X(64) X(65) X(66) X(67)
#define NR_ELEMS_G17(X) X(68) X(69) X(70) X(71)
#define NR_ELEMS_G18(X) X(72) X(73) X(74) X(75)
#define NR_ELEMS_G19(X) X(76) X(77) X(78) X(79)
#define NR_ELEMS_G20(X) X(80) X(81) X(82) X(83)
#define NR_ELEMS_G21(X) X(84) X(85) X(86) X(87)
#define NR_ELEMS_G22(X) X(88) X(89) X(90) X(91)
#define NR_ELEMS_G23(X) X(92) X(93) X(94) X(95)
#define NR_ELEMS_G24(X) X(96) X(97) X(98) X(99)
#define NR_ELEMS_G25(X) X(100) X(101) X(102) X(103)
#define NR_ELEMS_G26(X) X(104) X(105) X(106) X(107)
#define NR_ELEMS_G27(X) X(108) X(109) X(110) X(111)
#define NR_ELEMS_G28(X) X(112) X(113) X(114) X(115)
#define NR_ELEMS_G29(X) X(116) X(117) X(118) X(119)
#define NR_ELEMS_G30(X) X(120) X(121) X(122) X(123)
#define NR_ELEMS_G31(X) X(124) X(125) X(126) X(127)
#define NR_ELEMS_G32(X) X(128) X(129) X(130) X(131)
#define NR_ELEMS_G33(X) X(132) X(133) X(134) X(135)
#define NR_ELEMS_G34(X) X(136) X(137) X(138) X(139)
#define NR_ELEMS_G35(X) X(140) X(141) X(142) X(143)
#define NR_ELEMS_G36(X) X(144) X(145) X(146) X(147)
#define NR_ELEMS_G37(X) X(148) X(149) X(150) X(151)
#define NR_ELEMS_G38(X) X(152) X(153) X(154) X(155)
#define NR_ELEMS_G39(X) X(156) X(157) X(158) X(159)
#define NR_ELEMS_G40(X) X(160) X(161) X(162) X(163)
#define NR_ELEMS_G41(X) X(164) X(165) X(166) X(167)
#define NR_ELEMS_G42(X) X(168) X(169) X(170) X(171)
#define NR_ELEMS_G43(X) X(172) X(173) X(174) X(175)
#define NR_ELEMS_G44(X) X(176) X(177) X(178) X(179)
#define NR_ELEMS_G45(X) X(180) X(181) X(182) X(183)
#define NR_ELEMS_G46(X) X(184) X(185) X(186) X(187)
#define NR_ELEMS_G47(X) X(188) X(189) X(190) X(191)
#define NR_ELEMS_G48(X) X(192) X(193) X(194) X(195)
#define NR_ELEMS_G49(X) X(196) X(197) X(198) X(199)
#define NR_ELEMS_G50(X) X(200) X(201) X(202) X(203)
#define NR_ELEMS_G51(X) X(204) X(205) X(206) X(207)
#define NR_ELEMS_G52(X) X(208) X(209) X(210) X(211)
#define NR_ELEMS_G53(X) X(212) X(213) X(214) X(215)
#define NR_ELEMS_G54(X) X(216) X(217) X(218) X(219)
#define NR_ELEMS_G55(X) X(220) X(221) X(222) X(223)
#define NR_ELEMS_G56(X) X(224) X(225) X(226) X(227)
#define NR_ELEMS_G57(X) X(228) X(229) X(230) X(231)
#define NR_ELEMS_G58(X) X(232) X(233) X(234) X(235)
#define NR_ELEMS_G59(X) X(236) X(237) X(238) X(239)
#define NR_ELEMS_G60(X) X(240) X(241) X(242) X(243)
#define NR_ELEMS_G61(X) X(244) X(245) X(246) X(247)
#define NR_ELEMS_G62(X) X(248) X(249) X(250) X(251)
#define NR_ELEMS_G63(X) X(252) X(253) X(254) X(255)

#if NR_ELEMS > 0
#define NR_ELEMS_U0(X) NR_ELEMS_G0(X)
#else
#define NR_ELEMS_U0(X)
#endif
#if NR_ELEMS > 4
#define NR_ELEMS_U1(X) NR_ELEMS_G1(X)
#else
#define NR_ELEMS_U1(X)
#endif
#if NR_ELEMS > 8
#define NR_ELEMS_U2(X) NR_ELEMS_G2(X)
#else
#define NR_ELEMS_U2(X)
#endif
#if NR_ELEMS > 12
#define NR_ELEMS_U3(X) NR_ELEMS_G3(X)
#else
#define NR_ELEMS_U3(X)
#endif
#if NR_ELEMS > 16
#define NR_ELEMS_U4(X) NR_ELEMS_G4(X)
#else
#define NR_ELEMS_U4(X)
#endif
#if NR_ELEMS > 20
#define NR_ELEMS_U5(X) NR_ELEMS_G5(X)
#else
#define NR_ELEMS_U5(X)
#endif
#if NR_ELEMS > 24
#define NR_ELEMS_U6(X) NR_ELEMS_G6(X)
#else
#define NR_ELEMS_U6(X)
#endif
#if NR_ELEMS > 28
#define NR_ELEMS_U7(X) NR_ELEMS_G7(X)
#else
#define NR_ELEMS_U7(X)
#endif
#if NR_ELEMS > 32
#define NR_ELEMS_U8(X) NR_ELEMS_G8(X)
#else
#define NR_ELEMS_U8(X)
#endif
#if NR_ELEMS > 36
#define NR_ELEMS_U9(X) NR_ELEMS_G9(X)
#else
#define NR_ELEMS_U9(X)
#endif
#if NR_ELEMS > 40
#define NR_ELEMS_U10(X) NR_ELEMS_G10(X)
#else
#define NR_ELEMS_U10(X)
#endif
#if NR_ELEMS > 44
#define NR_ELEMS_U11(X) NR_ELEMS_G11(X)
#else
#define NR_ELEMS_U11(X)
#endif
#if NR_ELEMS > 48
#define NR_ELEMS_U12(X) NR_ELEMS_G12(X)
#else
#define NR_ELEMS_U12(X)
#endif
#if NR_ELEMS > 52
#define NR_ELEMS_U13(X) NR_ELEMS_G13(X)
#else
#define NR_ELEMS_U13(X)
#endif
#if NR_ELEMS > 56
#define NR_ELEMS_U14(X) NR_ELEMS_G14(X)
#else
#define NR_ELEMS_U14(X)
#endif
#if NR_ELEMS > 60
#define NR_ELEMS_U15(X) NR_ELEMS_G15(X)
#else
#define NR_ELEMS_U15(X)
#endif
#if NR_ELEMS > 64
#define NR_ELEMS_U16(X) NR_ELEMS_G16(X)
#else
#define NR_ELEMS_U16(X)
#endif
#if NR_ELEMS > 68
#define NR_ELEMS_U17(X) NR_ELEMS_G17(X)
#else
#define NR_ELEMS_U17(X)
#endif
#if NR_ELEMS > 72
#define NR_ELEMS_U18(X) NR_ELEMS_G18(X)
#else
#define NR_ELEMS_U18(X)
#endif
#if NR_ELEMS > 76
#define NR_ELEMS_U19(X) NR_ELEMS_G19(X)
#else
#define NR_ELEMS_U19(X)
#endif
#if NR_ELEMS > 80
#define NR_ELEMS_U20(X) NR_ELEMS_G20(X)
#else
#define NR_ELEMS_U20(X)
#endif
#if NR_ELEMS > 84
#define NR_ELEMS_U21(X) NR_ELEMS_G21(X)
#else
#define NR_ELEMS_U21(X)
#endif
#if NR_ELEMS > 88
#define NR_ELEMS_U22(X) NR_ELEMS_G22(X)
#else
#define NR_ELEMS_U22(X)
#endif
#if NR_ELEMS > 92
#define NR_ELEMS_U23(X) NR_ELEMS_G23(X)
#else
#define NR_ELEMS_U23(X)
#endif
#if NR_ELEMS > 96
#define NR_ELEMS_U24(X) NR_ELEMS_G24(X)
#else
#define NR_ELEMS_U24(X)
#endif
#if NR_ELEMS > 100
#define NR_ELEMS_U25(X) NR_ELEMS_G25(X)
#else
#define NR_ELEMS_U25(X)
#endif
#if NR_ELEMS > 104
#define NR_ELEMS_U26(X) NR_ELEMS_G26(X)
#else
#define NR_ELEMS_U26(X)
#endif
#if NR_ELEMS > 108
#define NR_ELEMS_U27(X) NR_ELEMS_G27(X)
#else
#define NR_ELEMS_U27(X)
#endif
#if NR_ELEMS > 112
#define NR_ELEMS_U28(X) NR_ELEMS_G28(X)
#else
#define NR_ELEMS_U28(X)
#endif
#if NR_ELEMS > 116
#define NR_ELEMS_U29(X) NR_ELEMS_G29(X)
#else
#define NR_ELEMS_U29(X)
#endif
#if NR_ELEMS > 120
#define NR_ELEMS_U30(X) NR_ELEMS_G30(X)
#else
#define NR_ELEMS_U30(X)
#endif
#if NR_ELEMS > 124
#define NR_ELEMS_U31(X) NR_ELEMS_G31(X)
#else
#define NR_ELEMS_U31(X)
#endif
#if NR_ELEMS > 128
#define NR_ELEMS_U32(X) NR_ELEMS_G32(X)
#else
#define NR_ELEMS_U32(X)
#endif
#if NR_ELEMS > 132
#define NR_ELEMS_U33(X) NR_ELEMS_G33(X)
#else
#define NR_ELEMS_U33(X)
#endif
#if NR_ELEMS > 136
#define NR_ELEMS_U34(X) NR_ELEMS_G34(X)
#else
#define NR_ELEMS_U34(X)
#endif
#if NR_ELEMS > 140
#define NR_ELEMS_U35(X) NR_ELEMS_G35(X)
#else
#define NR_ELEMS_U35(X)
#endif
#if NR_ELEMS > 144
#define NR_ELEMS_U36(X) NR_ELEMS_G36(X)
#else
#define NR_ELEMS_U36(X)
#endif
#if NR_ELEMS > 148
#define NR_ELEMS_U37(X) NR_ELEMS_G37(X)
#else
#define NR_ELEMS_U37(X)
#endif
#if NR_ELEMS > 152
#define NR_ELEMS_U38(X) NR_ELEMS_G38(X)
#else
#define NR_ELEMS_U38(X)
#endif
#if NR_ELEMS > 156
#define NR_ELEMS_U39(X) NR_ELEMS_G39(X)
#else
#define NR_ELEMS_U39(X)
#endif
#if NR_ELEMS > 160
#define NR_ELEMS_U40(X) NR_ELEMS_G40(X)
#else
#define NR_ELEMS_U40(X)
#endif
#if NR_ELEMS > 164
#define NR_ELEMS_U41(X) NR_ELEMS_G41(X)
#else
#define NR_ELEMS_U41(X)
#endif
#if NR_ELEMS > 168
#define NR_ELEMS_U42(X) NR_ELEMS_G42(X)
#else
#define NR_ELEMS_U42(X)
#endif
#if NR_ELEMS > 172
#define NR_ELEMS_U43(X) NR_ELEMS_G43(X)
#else
#define NR_ELEMS_U43(X)
#endif
#if NR_ELEMS > 176
#define NR_ELEMS_U44(X) NR_ELEMS_G44(X)
#else
#define NR_ELEMS_U44(X)
#endif
#if NR_ELEMS > 180
#define NR_ELEMS_U45(X) NR_ELEMS_G45(X)
#else
#define NR_ELEMS_U45(X)
#endif
#if NR_ELEMS > 184
#define NR_ELEMS_U46(X) NR_ELEMS_G46(X)
#else
#define NR_ELEMS_U46(X)
#endif
#if NR_ELEMS > 188
#define NR_ELEMS_U47(X) NR_ELEMS_G47(X)
#else
#define NR_ELEMS_U47(X)
#endif
#if NR_ELEMS > 192
#define NR_ELEMS_U48(X) NR_ELEMS_G48(X)
#else
#define NR_ELEMS_U48(X)
#endif
#if NR_ELEMS > 196
#define NR_ELEMS_U49(X) NR_ELEMS_G49(X)
#else
#define NR_ELEMS_U49(X)
#endif
#if NR_ELEMS > 200
#define NR_ELEMS_U50(X) NR_ELEMS_G50(X)
#else
#define NR_ELEMS_U50(X)
#endif
#if NR_ELEMS > 204
#define NR_ELEMS_U51(X) NR_ELEMS_G51(X)
#else
#define NR_ELEMS_U51(X)
#endif
#if NR_ELEMS > 208
#define NR_ELEMS_U52(X) NR_ELEMS_G52(X)
#else
#define NR_ELEMS_U52(X)
#endif
#if NR_ELEMS > 212
#define NR_ELEMS_U53(X) NR_ELEMS_G53(X)
#else
#define NR_ELEMS_U53(X)
#endif
#if NR_ELEMS > 216
#define NR_ELEMS_U54(X) NR_ELEMS_G54(X)
#else
#define NR_ELEMS_U54(X)
#endif
#if NR_ELEMS > 220
#define NR_ELEMS_U55(X) NR_ELEMS_G55(X)
#else
#define NR_ELEMS_U55(X)
#endif
#if NR_ELEMS > 224
#define NR_ELEMS_U56(X) NR_ELEMS_G56(X)
#else
#define NR_ELEMS_U56(X)
#endif
#if NR_ELEMS > 228
#define NR_ELEMS_U57(X) NR_ELEMS_G57(X)
#else
#define NR_ELEMS_U57(X)
#endif
#if NR_ELEMS > 232
#define NR_ELEMS_U58(X) NR_ELEMS_G58(X)
#else
#define NR_ELEMS_U58(X)
#endif
#if NR_ELEMS > 236
#define NR_ELEMS_U59(X) NR_ELEMS_G59(X)
#else
#define NR_ELEMS_U59(X)
#endif
#if NR_ELEMS > 240
#define NR_ELEMS_U60(X) NR_ELEMS_G60(X)
#else
#define NR_ELEMS_U60(X)
#endif
#if NR_ELEMS > 244
#define NR_ELEMS_U61(X) NR_ELEMS_G61(X)
#else
#define NR_ELEMS_U61(X)
#endif
#if NR_ELEMS > 248
#define NR_ELEMS_U62(X) NR_ELEMS_G62(X)
#else
#define NR_ELEMS_U62(X)
#endif
#if NR_ELEMS > 252
#define NR_ELEMS_U63(X) NR_ELEMS_G63(X)
#else
#define NR_ELEMS_U63(X)
#endif

#define NR_FOR_EACH_ELEM(X) \
    NR_ELEMS_U0(X) NR_ELEMS_U1(X) NR_ELEMS_U2(X) NR_ELEMS_U3(X) NR_ELEMS_U4(X) NR_ELEMS_U5(X) \
    NR_ELEMS_U6(X) NR_ELEMS_U7(X) NR_ELEMS_U8(X) NR_ELEMS_U9(X) NR_ELEMS_U10(X) NR_ELEMS_U11(X) \
    NR_ELEMS_U12(X) NR_ELEMS_U13(X) NR_ELEMS_U14(X) NR_ELEMS_U15(X) NR_ELEMS_U16(X) NR_ELEMS_U17(X) \
    NR_ELEMS_U18(X) NR_ELEMS_U19(X) NR_ELEMS_U20(X) NR_ELEMS_U21(X) NR_ELEMS_U22(X) NR_ELEMS_U23(X) \
    NR_ELEMS_U24(X) NR_ELEMS_U25(X) NR_ELEMS_U26(X) NR_ELEMS_U27(X) NR_ELEMS_U28(X) NR_ELEMS_U29(X) \
    NR_ELEMS_U30(X) NR_ELEMS_U31(X) NR_ELEMS_U32(X) NR_ELEMS_U33(X) NR_ELEMS_U34(X) NR_ELEMS_U35(X) \
    NR_ELEMS_U36(X) NR_ELEMS_U37(X) NR_ELEMS_U38(X) NR_ELEMS_U39(X) NR_ELEMS_U40(X) NR_ELEMS_U41(X) \
    NR_ELEMS_U42(X) NR_ELEMS_U43(X) NR_ELEMS_U44(X) NR_ELEMS_U45(X) NR_ELEMS_U46(X) NR_ELEMS_U47(X) \
    NR_ELEMS_U48(X) NR_ELEMS_U49(X) NR_ELEMS_U50(X) NR_ELEMS_U51(X) NR_ELEMS_U52(X) NR_ELEMS_U53(X) \
    NR_ELEMS_U54(X) NR_ELEMS_U55(X) NR_ELEMS_U56(X) NR_ELEMS_U57(X) NR_ELEMS_U58(X) NR_ELEMS_U59(X) \
    NR_ELEMS_U60(X) NR_ELEMS_U61(X) NR_ELEMS_U62(X) NR_ELEMS_U63(X)

#endif  /* NR_ELEMS_P4 */
