/* core.p4 -- the built-in target's own declarations of the P4_16 core library.
 * Written for this project from the P4_16 language specification. */

#ifndef SOFTSWITCH_CORE_P4
#define SOFTSWITCH_CORE_P4
/* p4c's core.p4 defines this; sample programs test it with #ifdef. */
#define _CORE_P4_

/* Standard error codes; the order gives their numeric codes. */
error {
    NoError,
    PacketTooShort,
    NoMatch,
    StackOutOfBounds,
    HeaderTooShort,
    ParserTimeout,
    ParserInvalidArgument
}

/* The packet being parsed. */
extern packet_in {
    /* Copy a fixed-size header out of the packet and make it valid. */
    void extract<T>(out T hdr);
    /* Copy a header whose varbit field takes variableFieldSizeInBits bits. */
    void extract<T>(out T variableSizeHeader, in bit<32> variableFieldSizeInBits);
    /* Read the next bits without consuming them. */
    T lookahead<T>();
    /* Skip sizeInBits bits. */
    void advance(in bit<32> sizeInBits);
    /* Total packet length in bytes. */
    bit<32> length();
}

/* The packet being deparsed. */
extern packet_out {
    /* Append a header (if valid) or every valid header of a struct/stack. */
    void emit<T>(in T hdr);
}

/* In a parser: move to reject with toSignal when check is false. */
extern void verify(in bool check, in error toSignal);

/* Checked by the compiler: rejects the program when check is false. */
extern bool static_assert(bool check, string message);
extern bool static_assert(bool check);

/* The action that does nothing. */
@noWarn("unused")
action NoAction() {}

/* Match kinds every architecture supports. */
match_kind {
    exact,
    ternary,
    lpm
}

#endif
