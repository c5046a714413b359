// Collective-communication executor on ns-3 point-to-point links.
//
// Loaded at run time by sim/ns3sim.py with cppyy.cppdef(), after the ns-3 Python bindings
// (PyPI package `ns3`) have loaded the ns-3 libraries. ns-3 provides the links: packet
// serialisation at each link's DataRate, propagation delay, and FIFO output queues
// (PointToPointNetDevice + DropTailQueue). This file provides what ns-3 does not know:
// spine-leaf routing (per-packet spraying over the spines), the in-network aggregation done
// by leaf and spine switches, and a dependency graph of operations that the Python side
// builds for each collective (ring, 2D torus, in-network, sparse all-gather).
//
// Nodes are numbered by us: workers [0, P), host switches [P, P+H) when gpus_per_host > 1
// (the NVLink/NVSwitch fabric inside a machine), leaves, then spines. Packet metadata rides
// in a side table keyed by the packet's ns-3 uid (every hop creates a fresh packet), which
// avoids registering a new Tag/Header TypeId inside the JIT.

#include "ns3/core-module.h"
#include "ns3/network-module.h"
#include "ns3/point-to-point-module.h"

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace inasim
{

enum OpKind : int32_t
{
    OP_SEND = 0, // src worker sends `bytes` to dst worker; done when all bytes arrived
    OP_INA = 1,  // src worker contributes `bytes` to in-network job `job`; done when the
                 // whole aggregated result is back at src
};

enum PktKind : int32_t
{
    PK_DATA = 0,      // point-to-point data of an OP_SEND
    PK_INA_UP = 1,    // worker -> leaf contribution (slot = seq)
    PK_INA_PART = 2,  // leaf -> spine partial sum
    PK_INA_DOWN = 3,  // spine -> leaf total
    PK_INA_RES = 4,   // leaf -> worker total
};

struct Meta
{
    int32_t kind;
    int32_t dst;   // our node id
    int32_t op;    // OP_SEND: op id; PK_INA_RES: the member's op id
    int32_t job;   // in-network job id (INA kinds)
    int64_t seq;   // packet index within the message (the aggregation slot)
    int64_t bytes; // payload bytes
};

struct Params
{
    int32_t spines = 1;
    int32_t leaves = 1;
    int32_t hostsPerLeaf = 1;
    int32_t gpusPerHost = 1;
    double hostBps = 10e6;   // host NIC <-> leaf
    double fabricBps = 10e6; // leaf <-> spine
    double intraBps = 1e9;   // GPU <-> host switch (only when gpusPerHost > 1)
    double linkDelay = 0.0;  // seconds, host links
    double fabricDelay = 0.0; // seconds, leaf-spine links (with the hops they stand for)
    double intraDelay = 0.0; // seconds, intra-host links
    double switchDelay = 0.0; // seconds of processing in each leaf/spine per packet
    int64_t segment = 1024;   // payload bytes per packet
    int32_t header = 0;       // header bytes added to every packet on the wire
    int32_t window = 64;      // in-network credits (packets in flight) per worker
    int32_t message = 0;      // packets per credit (0: one, a sliding window of packets; else a
                              // credit comes back when its message's whole result is in and
                              // the connection's receiver has acknowledged it)
    int32_t inaSpines = 0;    // spines one in-network job's slots use (0: all, sprayed)
    int32_t switchHeader = 0; // extra header bytes on leaf <-> spine aggregation packets
    int32_t sendWindow = 0;   // point-to-point packets in flight per send (0: no limit); the
                              // receiver acknowledges every sendAckEvery packets and the last,
                              // and each ACK lets as many more go (the RoCE transport's window)
    int32_t sendAckEvery = 16;
};

class Engine
{
  public:
    explicit Engine(const Params& p)
        : m_p(p)
    {
        m_workers = p.leaves * p.hostsPerLeaf * p.gpusPerHost;
        m_hosts = p.leaves * p.hostsPerLeaf;
        m_hostSwBase = m_workers;
        m_leafBase = m_hostSwBase + (p.gpusPerHost > 1 ? m_hosts : 0);
        m_spineBase = m_leafBase + p.leaves;
        m_nodes = m_spineBase + (p.leaves > 1 ? p.spines : 0);
    }

    int32_t Workers() const { return m_workers; }

    void AddOps(int64_t n,
                const int32_t* kind,
                const int32_t* src,
                const int32_t* dst,
                const int64_t* bytes,
                const int32_t* job)
    {
        for (int64_t i = 0; i < n; ++i)
        {
            m_kind.push_back(kind[i]);
            m_src.push_back(src[i]);
            m_dst.push_back(dst[i]);
            m_bytes.push_back(bytes[i]);
            m_job.push_back(job[i]);
        }
    }

    // dependency i: op[i] may start only after dep[i] completed
    void AddDeps(int64_t n, const int64_t* op, const int64_t* dep)
    {
        for (int64_t i = 0; i < n; ++i)
        {
            m_depOp.push_back(op[i]);
            m_depOn.push_back(dep[i]);
        }
    }

    // Builds the network, runs the simulation; returns the time the last op completed
    // (seconds) or -1 when some op never completed.
    double Run()
    {
        using namespace ns3;
        BuildNetwork();
        Prepare();
        for (size_t op = 0; op < m_kind.size(); ++op)
        {
            if (m_pending[op] == 0)
            {
                Simulator::ScheduleNow(&Engine::StartOp, this, (int64_t)op);
            }
        }
        Simulator::Run();
        double last = 0.0;
        int64_t done = 0;
        for (double t : m_finish)
        {
            if (t >= 0)
            {
                ++done;
                last = std::max(last, t);
            }
        }
        m_incomplete = (int64_t)m_finish.size() - done;
        Simulator::Destroy();
        m_meta.clear();
        return m_incomplete == 0 ? last : -1.0;
    }

    double FinishTime(int64_t op) const { return m_finish[op]; }
    int64_t Incomplete() const { return m_incomplete; }
    int64_t PacketsSent() const { return m_packets; }
    int64_t WireBytes() const { return m_wireBytes; }

  private:
    // ------------------------------------------------------------------ topology
    bool IsWorker(int32_t n) const { return n < m_workers; }
    bool IsHostSw(int32_t n) const { return n >= m_hostSwBase && n < m_leafBase; }
    bool IsLeaf(int32_t n) const { return n >= m_leafBase && n < m_spineBase; }
    bool IsSpine(int32_t n) const { return n >= m_spineBase; }
    int32_t HostOf(int32_t w) const { return w / m_p.gpusPerHost; }
    int32_t LeafOfHost(int32_t h) const { return h / m_p.hostsPerLeaf; }
    int32_t LeafOf(int32_t w) const { return LeafOfHost(HostOf(w)); }

    ns3::Ptr<ns3::NetDevice> Link(ns3::Ptr<ns3::Node> a,
                                  ns3::Ptr<ns3::Node> b,
                                  double bps,
                                  double delay,
                                  ns3::Ptr<ns3::NetDevice>* other)
    {
        using namespace ns3;
        PointToPointHelper h;
        h.SetDeviceAttribute("DataRate", DataRateValue(DataRate((uint64_t)bps)));
        h.SetChannelAttribute("Delay", TimeValue(Seconds(delay)));
        h.SetQueue("ns3::DropTailQueue<Packet>",
                   "MaxSize",
                   QueueSizeValue(QueueSize(QueueSizeUnit::PACKETS, 4000000000u)));
        NetDeviceContainer d = h.Install(a, b);
        *other = d.Get(1);
        return d.Get(0);
    }

    void BuildNetwork()
    {
        using namespace ns3;
        m_node.clear();
        m_ports.assign(m_nodes, {});
        for (int32_t i = 0; i < m_nodes; ++i)
        {
            Ptr<Node> n = CreateObject<Node>();
            m_idOf[n->GetId()] = i;
            m_node.push_back(n);
        }
        const int32_t g = m_p.gpusPerHost;
        // Ports: worker [0] = up. Host switch [0..g) = GPUs, [g] = up.
        // Leaf [0..hpl) = hosts, [hpl + s] = spine s. Spine [l] = leaf l.
        for (int32_t i = 0; i < m_nodes; ++i)
        {
            if (IsHostSw(i))
            {
                m_ports[i].resize(g + 1);
            }
            else if (IsLeaf(i))
            {
                m_ports[i].resize(m_p.hostsPerLeaf + (m_p.leaves > 1 ? m_p.spines : 0));
            }
            else if (IsSpine(i))
            {
                m_ports[i].resize(m_p.leaves);
            }
            else
            {
                m_ports[i].resize(1);
            }
        }
        for (int32_t h = 0; h < m_hosts; ++h)
        {
            int32_t leaf = m_leafBase + LeafOfHost(h);
            int32_t slot = h % m_p.hostsPerLeaf;
            int32_t hostNode = h; // the worker itself when g == 1
            if (g > 1)
            {
                hostNode = m_hostSwBase + h;
                for (int32_t s = 0; s < g; ++s)
                {
                    int32_t w = h * g + s;
                    m_ports[w][0] = Link(m_node[w], m_node[hostNode], m_p.intraBps,
                                         m_p.intraDelay, &m_ports[hostNode][s]);
                }
                m_ports[hostNode][g] = Link(m_node[hostNode], m_node[leaf], m_p.hostBps,
                                            m_p.linkDelay, &m_ports[leaf][slot]);
            }
            else
            {
                m_ports[hostNode][0] = Link(m_node[hostNode], m_node[leaf], m_p.hostBps,
                                            m_p.linkDelay, &m_ports[leaf][slot]);
            }
        }
        if (m_p.leaves > 1)
        {
            for (int32_t l = 0; l < m_p.leaves; ++l)
            {
                for (int32_t s = 0; s < m_p.spines; ++s)
                {
                    int32_t leaf = m_leafBase + l;
                    int32_t spine = m_spineBase + s;
                    m_ports[leaf][m_p.hostsPerLeaf + s] =
                        Link(m_node[leaf], m_node[spine], m_p.fabricBps, m_p.fabricDelay,
                             &m_ports[spine][l]);
                }
            }
        }
        for (int32_t i = 0; i < m_nodes; ++i)
        {
            m_node[i]->RegisterProtocolHandler(MakeCallback(&Engine::Receive, this),
                                               0x0800,
                                               Ptr<NetDevice>(),
                                               false);
        }
    }

    int32_t SpineFor(const Meta& m) const
    {
        // Per-packet spraying: consecutive packets of a flow use consecutive spines.
        return (int32_t)((m.seq + m.dst) % m_p.spines);
    }

    int32_t Route(int32_t me, const Meta& m) const
    {
        const int32_t dst = m.dst;
        if (IsWorker(me))
        {
            return 0;
        }
        if (IsHostSw(me))
        {
            int32_t h = me - m_hostSwBase;
            if (IsWorker(dst) && HostOf(dst) == h)
            {
                return dst % m_p.gpusPerHost;
            }
            return m_p.gpusPerHost;
        }
        if (IsLeaf(me))
        {
            int32_t l = me - m_leafBase;
            if (IsWorker(dst) && LeafOf(dst) == l)
            {
                return HostOf(dst) % m_p.hostsPerLeaf;
            }
            if (IsSpine(dst))
            {
                return m_p.hostsPerLeaf + (dst - m_spineBase);
            }
            return m_p.hostsPerLeaf + SpineFor(m);
        }
        // spine
        if (IsLeaf(dst))
        {
            return dst - m_leafBase;
        }
        return LeafOf(dst);
    }

    // ------------------------------------------------------------------ packets
    void Transmit(int32_t me, Meta m)
    {
        using namespace ns3;
        const bool interSwitch = m.kind == PK_INA_PART || m.kind == PK_INA_DOWN;
        const int64_t header = m_p.header + (interSwitch ? m_p.switchHeader : 0);
        Ptr<Packet> p = Create<Packet>((uint32_t)(m.bytes + header));
        m_meta[p->GetUid()] = m;
        ++m_packets;
        m_wireBytes += m.bytes + header;
        m_ports[me][Route(me, m)]->Send(p, Mac48Address::GetBroadcast(), 0x0800);
    }

    void SwitchSend(int32_t me, const Meta& m)
    {
        if (m_p.switchDelay > 0)
        {
            ns3::Simulator::Schedule(ns3::Seconds(m_p.switchDelay),
                                     &Engine::Transmit, this, me, m);
        }
        else
        {
            Transmit(me, m);
        }
    }

    void Receive(ns3::Ptr<ns3::NetDevice> dev,
                 ns3::Ptr<const ns3::Packet> p,
                 uint16_t,
                 const ns3::Address&,
                 const ns3::Address&,
                 ns3::NetDevice::PacketType)
    {
        int32_t me = m_idOf[dev->GetNode()->GetId()];
        auto it = m_meta.find(p->GetUid());
        if (it == m_meta.end())
        {
            return;
        }
        Meta m = it->second;
        m_meta.erase(it);
        if (m.dst != me)
        {
            if (IsLeaf(me) || IsSpine(me))
            {
                SwitchSend(me, m);
            }
            else
            {
                Transmit(me, m);
            }
            return;
        }
        switch (m.kind)
        {
        case PK_DATA:
            m_got[m.op] += m.bytes;
            if (m_p.sendWindow > 0)
            {
                DataAcknowledged(m.op);
            }
            if (m_got[m.op] >= m_bytes[m.op])
            {
                CompleteOp(m.op);
            }
            break;
        case PK_INA_UP:
            LeafAggregate(me, m);
            break;
        case PK_INA_PART:
            SpineAggregate(me, m);
            break;
        case PK_INA_DOWN:
            LeafFanOut(me, m);
            break;
        case PK_INA_RES:
            WorkerResult(m);
            break;
        default:
            break;
        }
    }

    // ------------------------------------------------------------------ windowed sends
    int64_t SendPackets(int64_t op) const
    {
        return (m_bytes[op] + m_p.segment - 1) / m_p.segment;
    }

    void SendData(int64_t op, int64_t seq)
    {
        Meta m;
        m.kind = PK_DATA;
        m.dst = m_dst[op];
        m.op = (int32_t)op;
        m.job = -1;
        m.seq = seq + m_src[op];
        m.bytes = std::min<int64_t>(m_p.segment, m_bytes[op] - seq * m_p.segment);
        Transmit(m_src[op], m);
    }

    // A data packet of a windowed send arrived: every sendAckEvery-th packet (and the last)
    // is acknowledged; the ACK reaches the sender one ACK latency later.
    void DataAcknowledged(int64_t op)
    {
        int64_t in = ++m_rcvd[op];
        if (in % m_p.sendAckEvery != 0 && in < SendPackets(op))
        {
            return;
        }
        ns3::Simulator::Schedule(ns3::Seconds(AckLatencyBetween(m_dst[op], m_src[op])),
                                 &Engine::SendAcked, this, op, in);
    }

    void SendAcked(int64_t op, int64_t upto)
    {
        m_acked[op] = std::max(m_acked[op], upto);
        int64_t end = std::min<int64_t>(m_acked[op] + m_p.sendWindow, SendPackets(op));
        while (m_next[op] < end)
        {
            SendData(op, m_next[op]++);
        }
    }

    // One ACK from worker ``from`` to worker ``to``: ahead of the data on every link
    // (topo/links.py), so propagation, serialisation and the switches' processing.
    double AckLatencyBetween(int32_t from, int32_t to) const
    {
        const double bits = 8.0 * (ACK_BYTES + m_p.header);
        if (HostOf(from) == HostOf(to))
        {
            return 2 * (m_p.intraDelay + bits / m_p.intraBps) + m_p.switchDelay;
        }
        double s = AckLatency();
        if (LeafOf(from) != LeafOf(to))
        {
            s += 2 * (m_p.fabricDelay + bits / m_p.fabricBps + m_p.switchDelay);
        }
        return s;
    }

    // ------------------------------------------------------------------ in-network
    static uint64_t SlotKey(int32_t job, int64_t seq)
    {
        return ((uint64_t)(uint32_t)job << 40) ^ (uint64_t)seq;
    }

    void LeafAggregate(int32_t me, const Meta& m)
    {
        int32_t l = me - m_leafBase;
        const auto& local = m_jobLeafMembers[m.job][l];
        uint64_t key = SlotKey(m.job, m.seq);
        int32_t c = ++m_leafCount[l][key];
        if (c < (int32_t)local.size())
        {
            return;
        }
        m_leafCount[l].erase(key);
        if (m_jobLeaves[m.job] == 1)
        {
            LeafFanOut(me, m);
            return;
        }
        Meta up = m;
        up.kind = PK_INA_PART;
        up.dst = m_spineBase + InaSpine(m.job, m.seq);
        SwitchSend(me, up);
    }

    // The spine aggregating slot ``seq`` of ``job``: spread over inaSpines spines starting
    // at the job's own (the emulation's controller gives each job one spine).
    int32_t InaSpine(int32_t job, int64_t seq) const
    {
        if (m_p.inaSpines <= 0 || m_p.inaSpines >= m_p.spines)
        {
            return (int32_t)(seq % m_p.spines);
        }
        return (int32_t)((job + seq % m_p.inaSpines) % m_p.spines);
    }

    void SpineAggregate(int32_t me, const Meta& m)
    {
        int32_t s = me - m_spineBase;
        uint64_t key = SlotKey(m.job, m.seq);
        int32_t c = ++m_spineCount[s][key];
        if (c < m_jobLeaves[m.job])
        {
            return;
        }
        m_spineCount[s].erase(key);
        for (int32_t l = 0; l < m_p.leaves; ++l)
        {
            if (!m_jobLeafMembers[m.job][l].empty())
            {
                Meta down = m;
                down.kind = PK_INA_DOWN;
                down.dst = m_leafBase + l;
                SwitchSend(me, down);
            }
        }
    }

    void LeafFanOut(int32_t me, const Meta& m)
    {
        int32_t l = me - m_leafBase;
        for (const auto& member : m_jobLeafMembers[m.job][l])
        {
            Meta res = m;
            res.kind = PK_INA_RES;
            res.dst = member.first;
            res.op = member.second;
            SwitchSend(me, res);
        }
    }

    // One ACK from a worker to another behind the same leaf on another host: two host links
    // and the leaf (and each end's host switch and intra-host link with several GPUs).
    double AckLatency() const
    {
        const double bits = 8.0 * (ACK_BYTES + m_p.header);
        double s = 2 * (m_p.linkDelay + bits / m_p.hostBps) + m_p.switchDelay;
        if (m_p.gpusPerHost > 1)
        {
            s += 2 * (m_p.intraDelay + bits / m_p.intraBps + m_p.switchDelay);
        }
        return s;
    }

    static constexpr int64_t ACK_BYTES = 4; // beyond the header: an ACK's AETH

    static constexpr int32_t MSG_RESULT = 1; // the message's whole result is in
    static constexpr int32_t MSG_ACKED = 2;  // its receiver acknowledged it

    // A message's credit comes back with both its result and its ACK (docs/protocol.md
    // section 4.4, the worker rule): then the next whole message goes out.
    void MessageSettled(int64_t op, int64_t msg, int32_t what)
    {
        uint64_t key = ((uint64_t)op << 32) ^ (uint64_t)msg;
        int32_t& state = m_msgState[key];
        state |= what;
        if (state != (MSG_RESULT | MSG_ACKED))
        {
            return;
        }
        m_msgState.erase(key);
        int64_t end = std::min<int64_t>(m_next[op] + m_p.message, InaPackets(op));
        while (m_next[op] < end)
        {
            InaSend(op, m_next[op]++);
        }
    }

    // Whether the result packet ``seq`` completed its message (``message`` packets, the
    // op's last one shorter).
    bool MessageDone(int64_t op, int64_t seq)
    {
        int64_t msg = seq / m_p.message;
        uint64_t key = ((uint64_t)op << 32) ^ (uint64_t)msg;
        int64_t size = std::min<int64_t>(m_p.message, InaPackets(op) - msg * m_p.message);
        if (++m_msgGot[key] < size)
        {
            return false;
        }
        m_msgGot.erase(key);
        return true;
    }

    int64_t InaPackets(int64_t op) const
    {
        return (m_bytes[op] + m_p.segment - 1) / m_p.segment;
    }

    void InaSend(int64_t op, int64_t seq)
    {
        Meta m;
        m.kind = PK_INA_UP;
        m.dst = m_leafBase + LeafOf(m_src[op]);
        m.op = (int32_t)op;
        m.job = m_job[op];
        m.seq = seq;
        m.bytes = std::min<int64_t>(m_p.segment, m_bytes[op] - seq * m_p.segment);
        Transmit(m_src[op], m);
    }

    void WorkerResult(const Meta& m)
    {
        int64_t op = m.op;
        m_got[op] += 1; // counts result packets for INA ops
        if (m_p.message <= 0)
        {
            if (m_next[op] < InaPackets(op))
            {
                InaSend(op, m_next[op]++);
            }
        }
        else if (MessageDone(op, m.seq))
        {
            int64_t msg = m.seq / m_p.message;
            // this worker receives the connection of the member before it behind its leaf
            // (controller/jobs.py pairs them in a ring per leaf) and acknowledges it end to end
            int64_t sender = m_ackTo[op];
            if (sender == op)
            {
                // alone behind its leaf: its own receiver (no wire to cross)
                MessageSettled(op, msg, MSG_RESULT | MSG_ACKED);
            }
            else
            {
                // the ACK crosses the leaf in a class of its own, ahead of the data queued on
                // the same links (topo/links.py serves acknowledgements first): its latency
                ns3::Simulator::Schedule(ns3::Seconds(AckLatency()), &Engine::MessageSettled,
                                         this, sender, msg, MSG_ACKED);
                MessageSettled(op, msg, MSG_RESULT);
            }
        }
        if (m_got[op] >= InaPackets(op))
        {
            CompleteOp(op);
        }
    }

    // ------------------------------------------------------------------ ops
    void Prepare()
    {
        const size_t n = m_kind.size();
        m_pending.assign(n, 0);
        m_finish.assign(n, -1.0);
        m_got.assign(n, 0);
        m_next.assign(n, 0);
        m_rcvd.assign(n, 0);
        m_acked.assign(n, 0);
        m_succStart.assign(n + 1, 0);
        for (size_t i = 0; i < m_depOp.size(); ++i)
        {
            ++m_pending[m_depOp[i]];
            ++m_succStart[m_depOn[i] + 1];
        }
        for (size_t i = 0; i < n; ++i)
        {
            m_succStart[i + 1] += m_succStart[i];
        }
        m_succ.assign(m_depOp.size(), 0);
        std::vector<int64_t> fill(m_succStart.begin(), m_succStart.end() - 1);
        for (size_t i = 0; i < m_depOp.size(); ++i)
        {
            m_succ[fill[m_depOn[i]]++] = m_depOp[i];
        }
        int32_t jobs = 0;
        for (size_t i = 0; i < n; ++i)
        {
            if (m_kind[i] == OP_INA)
            {
                jobs = std::max(jobs, m_job[i] + 1);
            }
        }
        m_jobLeafMembers.assign(jobs, std::vector<std::vector<std::pair<int32_t, int32_t>>>(
                                          m_p.leaves));
        m_jobLeaves.assign(jobs, 0);
        for (size_t i = 0; i < n; ++i)
        {
            if (m_kind[i] == OP_INA)
            {
                m_jobLeafMembers[m_job[i]][LeafOf(m_src[i])].emplace_back(m_src[i], (int32_t)i);
            }
        }
        for (int32_t j = 0; j < jobs; ++j)
        {
            for (int32_t l = 0; l < m_p.leaves; ++l)
            {
                if (!m_jobLeafMembers[j][l].empty())
                {
                    ++m_jobLeaves[j];
                }
            }
        }
        m_leafCount.assign(m_p.leaves, {});
        m_msgGot.clear();
        m_msgState.clear();
        m_ackTo.assign(n, -1);
        for (int32_t j = 0; j < jobs; ++j)
        {
            for (const auto& local : m_jobLeafMembers[j])
            {
                for (size_t k = 0; k < local.size(); ++k)
                {
                    m_ackTo[local[k].second] = local[(k + local.size() - 1) % local.size()].second;
                }
            }
        }
        m_spineCount.assign(m_p.spines, {});
    }

    void StartOp(int64_t op)
    {
        if (m_bytes[op] <= 0 || (m_kind[op] == OP_SEND && m_src[op] == m_dst[op]))
        {
            CompleteOp(op);
            return;
        }
        if (m_kind[op] == OP_SEND)
        {
            int64_t packets = SendPackets(op);
            int64_t first = m_p.sendWindow > 0 ? std::min<int64_t>(m_p.sendWindow, packets)
                                               : packets;
            for (int64_t seq = 0; seq < first; ++seq)
            {
                SendData(op, seq);
            }
            m_next[op] = first;
            return;
        }
        int64_t first = std::min<int64_t>(m_p.window, InaPackets(op));
        for (int64_t s = 0; s < first; ++s)
        {
            InaSend(op, s);
        }
        m_next[op] = first;
    }

    void CompleteOp(int64_t op)
    {
        if (m_finish[op] >= 0)
        {
            return;
        }
        m_finish[op] = ns3::Simulator::Now().GetSeconds();
        for (int64_t i = m_succStart[op]; i < m_succStart[op + 1]; ++i)
        {
            int64_t s = m_succ[i];
            if (--m_pending[s] == 0)
            {
                StartOp(s);
            }
        }
    }

    Params m_p;
    int32_t m_workers, m_hosts, m_hostSwBase, m_leafBase, m_spineBase, m_nodes;
    std::vector<ns3::Ptr<ns3::Node>> m_node;
    std::vector<std::vector<ns3::Ptr<ns3::NetDevice>>> m_ports;
    std::unordered_map<uint32_t, int32_t> m_idOf;
    std::unordered_map<uint64_t, Meta> m_meta;

    std::vector<int32_t> m_kind, m_src, m_dst, m_job;
    std::vector<int64_t> m_bytes;
    std::vector<int64_t> m_depOp, m_depOn;
    std::vector<int64_t> m_pending, m_succStart, m_succ, m_got, m_next;
    std::vector<int64_t> m_rcvd, m_acked; // windowed sends: packets in, packets acknowledged
    std::vector<double> m_finish;

    std::vector<std::vector<std::vector<std::pair<int32_t, int32_t>>>> m_jobLeafMembers;
    std::vector<int32_t> m_jobLeaves;
    std::vector<std::unordered_map<uint64_t, int32_t>> m_leafCount, m_spineCount;
    std::unordered_map<uint64_t, int64_t> m_msgGot; // (op, message) -> result packets in
    std::unordered_map<uint64_t, int32_t> m_msgState; // (op, message) -> MSG_* bits
    std::vector<int64_t> m_ackTo; // INA op -> the op whose connection it receives

    int64_t m_packets = 0;
    int64_t m_wireBytes = 0;
    int64_t m_incomplete = 0;
};

} // namespace inasim
