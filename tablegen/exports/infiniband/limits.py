"""What the InfiniBand architecture, and the ibsim ports fabroute loads into, allow."""

MAX_UNICAST_LID = 0xBFFF    # 0xC000 and above are multicast LIDs
MAX_IB_PORT = 254           # port numbers are 8 bit; 255 is reserved
NO_PORT = 255               # an LFT entry that forwards nowhere (dump_fts -a prints 255)
NUM_SLS = 16                # SL is a 4-bit field
IB_DATA_VLS = 8             # data VLs an ibsim port reports (VLCap VL0-7; OpenSM masks higher
                            # VLs away); real HCAs often have 8 too
VL_DROP = 15                # the SL2VL entry that drops a packet
