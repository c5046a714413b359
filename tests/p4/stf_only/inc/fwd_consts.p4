/* Found through -I tests/p4/stf_only/inc. */
const bit<9> DEFAULT_PORT = 9w3;
