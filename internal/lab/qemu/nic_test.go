package qemu

import (
	"strconv"
	"strings"
	"testing"
)

func TestNICArgs(t *testing.T) {
	listen := NIC{Socket: "/tmp/w/wan.sock", Listen: true, MAC: "52:54:00:00:00:01"}
	tests := []struct {
		name string
		nic  NIC
		want string
		err  string
	}{
		{
			name: "listening e1000",
			nic:  listen,
			want: "-netdev stream,id=n0,server=on,addr.type=unix,addr.path=/tmp/w/wan.sock -device e1000,netdev=n0,romfile=,mac=52:54:00:00:00:01",
		},
		{
			name: "peer",
			nic:  listen.Peer("52:54:00:00:00:02"),
			want: "-netdev stream,id=n0,server=off,addr.type=unix,addr.path=/tmp/w/wan.sock -device e1000,netdev=n0,romfile=,mac=52:54:00:00:00:02",
		},
		{
			name: "model",
			nic:  NIC{Model: "rtl8139", Socket: "/s", MAC: "52:54:00:00:00:03"},
			want: "-netdev stream,id=n0,server=off,addr.type=unix,addr.path=/s -device rtl8139,netdev=n0,romfile=,mac=52:54:00:00:00:03",
		},
		{
			name: "restricted user",
			nic:  NIC{RestrictedUser: true},
			want: "-netdev user,id=n0,restrict=on -device e1000,netdev=n0,romfile=",
		},
		{
			name: "LAN port on the user network, SSH forwarded from 127.0.0.1 only",
			nic: NIC{RestrictedUser: true, UserNet: "192.168.1.0/24", UserHost: "192.168.1.254", MAC: "52:54:00:00:00:04",
				Forwards: []Forward{{Proto: "tcp", HostPort: 2222, GuestAddr: "192.168.1.1", GuestPort: 22}}},
			want: "-netdev user,id=n0,restrict=on,net=192.168.1.0/24,host=192.168.1.254,hostfwd=tcp:127.0.0.1:2222-192.168.1.1:22 -device e1000,netdev=n0,romfile=,mac=52:54:00:00:00:04",
		},
		{name: "unplugged", nic: NIC{Unplugged: true}, want: "-netdev hubport,id=n0,hubid=" + strconv.Itoa(int(fnvID("n0"))) + " -device e1000,netdev=n0,romfile="},
		{
			name: "USB card in the hub's second port",
			nic:  NIC{Model: "usb-net", Socket: "/s", MAC: "52:54:00:00:00:05", USBPort: "1.2"},
			want: "-netdev stream,id=n0,server=off,addr.type=unix,addr.path=/s -device usb-net,netdev=n0,bus=usb-bus.0,port=1.2,mac=52:54:00:00:00:05",
		},
		{name: "USB card without a port", nic: NIC{Model: "usb-net", Socket: "/s"}, err: "want 1.N"},
		{name: "USB card past the hub", nic: NIC{Model: "usb-net", Socket: "/s", USBPort: "1.9"}, err: "want 1.N"},
		{name: "USB port on a PCI card", nic: NIC{Socket: "/s", USBPort: "1.1"}, err: "not a USB card"},
		{name: "forward without user network", nic: NIC{Socket: "/s", Forwards: []Forward{{Proto: "tcp", HostPort: 1, GuestAddr: "a", GuestPort: 1}}}, err: "need RestrictedUser"},
		{name: "bad forward", nic: NIC{RestrictedUser: true, Forwards: []Forward{{Proto: "sctp", HostPort: 1, GuestAddr: "a", GuestPort: 1}}}, err: "forward"},
		{name: "unplugged with a back-end", nic: NIC{Unplugged: true, Socket: "/s"}, err: "no back-end"},
		{name: "no back-end", nic: NIC{}, err: "no back-end"},
		{name: "both", nic: NIC{Socket: "/s", RestrictedUser: true}, err: "not both"},
		{name: "comma", nic: NIC{Socket: "/a,b"}, err: "comma"},
		{name: "too long", nic: NIC{Socket: "/" + strings.Repeat("x", 107)}, err: "longer than a unix socket allows"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args, err := tt.nic.Args("n0")
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(args, " "); got != tt.want {
				t.Errorf("args:\n got %s\nwant %s", got, tt.want)
			}
		})
	}
}

// The derived MACs of a link's two ends differ, stay the same from run
// to run, and are locally administered unicast addresses.
func TestNICDefaultMAC(t *testing.T) {
	a := NIC{Socket: "/tmp/x/a.sock", Listen: true}
	b := a.Peer("")
	if a.defaultMAC() == b.defaultMAC() {
		t.Errorf("both ends get %s", a.defaultMAC())
	}
	if a.defaultMAC() != (NIC{Socket: "/tmp/x/a.sock", Listen: true}).defaultMAC() {
		t.Error("derived MAC changes")
	}
	if !strings.HasPrefix(a.defaultMAC(), "52:54:00:") {
		t.Errorf("MAC %s", a.defaultMAC())
	}
}

func TestConfigNICs(t *testing.T) {
	c := Config{Kernel: "/k", NICs: []NIC{{Socket: "/a", Listen: true, MAC: "52:54:00:00:00:01"}, {RestrictedUser: true}}}
	args, err := c.CommandLine()
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(args, " ")
	for _, want := range []string{
		"-netdev stream,id=net0,server=on,addr.type=unix,addr.path=/a -device e1000,netdev=net0,romfile=,mac=52:54:00:00:00:01",
		"-netdev user,id=net1,restrict=on -device e1000,netdev=net1,romfile=",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("command line lacks %q:\n%s", want, got)
		}
	}
}

// The stand-in takes at most a hub's worth of USB cards and no PCI ones.
func TestPlugNICs(t *testing.T) {
	nine := make([]NIC, 9)
	if _, err := RaspiStandIn.PlugNICs(Config{}, nine); err == nil || !strings.Contains(err.Error(), "8 ports") {
		t.Errorf("nine cards: %v", err)
	}
	if _, err := RaspiStandIn.PlugNICs(Config{}, []NIC{{Model: "e1000", Socket: "/s"}}); err == nil || !strings.Contains(err.Error(), "usb-net") {
		t.Errorf("an e1000: %v", err)
	}
	c, err := RaspiStandIn.PlugNICs(Config{NICs: []NIC{{Socket: "/old"}}}, []NIC{{Socket: "/a"}, {Socket: "/b"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.NICs) != 2 || c.NICs[0].USBPort != "1.1" || c.NICs[1].USBPort != "1.2" || c.NICs[1].Model != "usb-net" || c.NICs[0].Socket != "/a" {
		t.Errorf("plugged: %+v", c.NICs)
	}
}
