package ports

import (
	"fmt"

	"roce-fwd/config"
	"roce-fwd/pcidev"
)

func checkOnePCI(pc config.Port, sysRoot string) error {
	dev, err := pcidev.Get(sysRoot, pc.PCI)
	if err != nil {
		return fmt.Errorf("%v (roce-fwd ports lists the NICs this machine has)", err)
	}
	return dev.CheckDPDK()
}
