/* v1model.p4 -- the built-in target's own declarations of the v1model architecture
 * (the architecture of BMv2's simple_switch), written for this project from the
 * v1model documentation.  Names and parameter names follow the standard ones so that
 * programs written for simple_switch compile unchanged. */

#ifndef SOFTSWITCH_V1MODEL_P4
#define SOFTSWITCH_V1MODEL_P4
#define _V1_MODEL_P4_

#include "core.p4"

/* A program may choose the version by defining it before the #include. */
#ifndef V1MODEL_VERSION
#define V1MODEL_VERSION 20180101
#endif
/* Versions of v1model.p4 that exist: 20180101 up to 20200408. */
const bool _v1model_version_known = static_assert(V1MODEL_VERSION >= 20180101 && V1MODEL_VERSION <= 20200408,
    "unknown V1MODEL_VERSION: supported are 20180101 to 20200408");

match_kind {
    range,
    optional,
    selector
}

/* Intrinsic metadata, in BMv2's field order. */
@metadata @name("standard_metadata")
struct standard_metadata_t {
    bit<9>  ingress_port;
    bit<9>  egress_spec;
    bit<9>  egress_port;
    bit<32> instance_type;
    bit<32> packet_length;
    bit<32> enq_timestamp;
    bit<19> enq_qdepth;
    bit<32> deq_timedelta;
    bit<19> deq_qdepth;
    bit<48> ingress_global_timestamp;
    bit<48> egress_global_timestamp;
    bit<16> mcast_grp;
    bit<16> egress_rid;
    bit<1>  checksum_error;
    error   parser_error;
    bit<3>  priority;
}

enum CounterType {
    packets,
    bytes,
    packets_and_bytes
}

enum MeterType {
    packets,
    bytes
}

/* An array of counters indexed by the program.  From V1MODEL_VERSION 20200408 on the
 * index type is a type parameter, as in p4c's v1model.p4. */
#if V1MODEL_VERSION >= 20200408
extern counter<I> {
    counter(bit<32> size, CounterType type);
    void count(in I index);
}
#else
extern counter {
    counter(bit<32> size, CounterType type);
    void count(in bit<32> index);
}
#endif

/* One counter per entry of the table that names it in its `counters` property. */
extern direct_counter {
    direct_counter(CounterType type);
    void count();
}

/* An array of two-rate three-colour meters. */
#if V1MODEL_VERSION >= 20200408
extern meter<I> {
    meter(bit<32> size, MeterType type);
    void execute_meter<T>(in I index, out T result);
}
#else
extern meter {
    meter(bit<32> size, MeterType type);
    void execute_meter<T>(in bit<32> index, out T result);
}
#endif

/* One meter per entry of the table that names it in its `meters` property. */
extern direct_meter<T> {
    direct_meter(MeterType type);
    void read(out T result);
}

/* An array of values that persist across packets. */
#if V1MODEL_VERSION >= 20200408
extern register<T, I> {
    register(bit<32> size);
    void read(out T result, in I index);
    void write(in I index, in T value);
}
#else
extern register<T> {
    register(bit<32> size);
    void read(out T result, in bit<32> index);
    void write(in bit<32> index, in T value);
}
#endif

/* Shared action data for a table (`implementation` property). */
extern action_profile {
    action_profile(bit<32> size);
}

/* A uniformly distributed value in [lo, hi]. */
extern void random<T>(out T result, in T lo, in T hi);

/* Send data to the control plane. */
extern void digest<T>(in bit<32> receiver, in T data);

enum HashAlgorithm {
    crc32,
    crc32_custom,
    crc16,
    crc16_custom,
    random,
    identity,
    csum16,
    xor16
}

/* Deprecated form: drops the packet via the global standard metadata. */
@deprecated("Please use mark_to_drop(standard_metadata) instead.")
extern void mark_to_drop();

/* Send the packet to the drop port at the end of the current pipeline. */
extern void mark_to_drop(inout standard_metadata_t standard_metadata);

/* result = base + (hash(data) % max). */
extern void hash<O, T, D, M>(out O result, in HashAlgorithm algo, in T base, in D data, in M max);

/* An action profile whose groups pick a member by a hash of the selector keys. */
extern action_selector {
    action_selector(HashAlgorithm algorithm, bit<32> size, bit<32> outputWidth);
}

enum CloneType {
    I2E,
    E2E
}

/* Deprecated checksum unit. */
@deprecated("Please use verify_checksum/update_checksum instead.")
extern Checksum16 {
    Checksum16();
    bit<16> get<D>(in D data);
}

/* Set standard_metadata.checksum_error when condition holds and checksum differs. */
extern void verify_checksum<T, O>(in bool condition, in T data, in O checksum, HashAlgorithm algo);

/* When condition holds, write the checksum of data into checksum. */
@pure
extern void update_checksum<T, O>(in bool condition, in T data, inout O checksum, HashAlgorithm algo);

/* As verify_checksum, with the packet payload appended to data. */
extern void verify_checksum_with_payload<T, O>(in bool condition, in T data, in O checksum, HashAlgorithm algo);

/* As update_checksum, with the packet payload appended to data. */
@noSideEffects
extern void update_checksum_with_payload<T, O>(in bool condition, in T data, inout O checksum, HashAlgorithm algo);

/* Deprecated: resubmit carrying the listed fields. */
extern void resubmit<T>(in T data);

/* Run ingress again on the original packet, keeping the metadata of field list `index`. */
extern void resubmit_preserving_field_list(bit<8> index);

/* Deprecated: recirculate carrying the listed fields. */
extern void recirculate<T>(in T data);

/* Send the deparsed packet back to the ingress parser, keeping field list `index`. */
extern void recirculate_preserving_field_list(bit<8> index);

/* Clone the packet into the clone session `session`. */
extern void clone(in CloneType type, in bit<32> session);

/* Deprecated: clone carrying the listed fields. */
@deprecated("Please use clone_preserving_field_list instead.")
extern void clone3<T>(in CloneType type, in bit<32> session, in T data);

/* Clone, keeping the user metadata of field list `index` in the clone. */
extern void clone_preserving_field_list(in CloneType type, in bit<32> session, bit<8> index);

/* Transmit at most `length` bytes of the packet. */
extern void truncate(in bit<32> length);

/* Abort the switch when check is false (debugging aid). */
extern void assert(in bool check);

/* For formal tools; behaves as assert on the target. */
extern void assume(in bool check);

/* Log a message (with {} placeholders filled from data). */
extern void log_msg(string msg);
extern void log_msg<T>(string msg, in T data);

/* The programmable blocks of v1model, in pipeline order. */
parser Parser<H, M>(packet_in b,
                    out H parsedHdr,
                    inout M meta,
                    inout standard_metadata_t standard_metadata);

control VerifyChecksum<H, M>(inout H hdr,
                             inout M meta);

@pipeline
control Ingress<H, M>(inout H hdr,
                      inout M meta,
                      inout standard_metadata_t standard_metadata);

@pipeline
control Egress<H, M>(inout H hdr,
                     inout M meta,
                     inout standard_metadata_t standard_metadata);

control ComputeChecksum<H, M>(inout H hdr,
                              inout M meta);

@deparser
control Deparser<H>(packet_out b, in H hdr);

package V1Switch<H, M>(Parser<H, M> p,
                       VerifyChecksum<H, M> vr,
                       Ingress<H, M> ig,
                       Egress<H, M> eg,
                       ComputeChecksum<H, M> ck,
                       Deparser<H> dep);

#endif
